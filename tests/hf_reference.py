"""Hugging Face `transformers` as the numerical reference for our exports."""

import json

import numpy as np
import torch
import transformers

from albert.checkpoints import model_weights, read_checkpoint, write_checkpoint


def torch_inputs(inputs):
    """Our encoder inputs as the keyword arguments of an HF ALBERT model."""
    return dict(input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
                attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long))


def assert_head_matches_huggingface(model, inputs, directory, head, architecture):
    """Exports `model` with `head`, loads it as `transformers.<architecture>`, compares the
    logits (≤ 1e-5) and reads the export back bit-exactly; returns the HF config dict."""
    config = model.albert_config
    ours = model(inputs, training=False)["logits"].numpy()
    write_checkpoint(model_weights(model), config, directory, "hf", head=head)
    saved = json.loads(open(f"{directory}/config.json").read())
    assert saved["architectures"] == [architecture]
    hf = getattr(transformers, architecture).from_pretrained(directory)
    hf.eval()
    with torch.no_grad():
        theirs = hf(**torch_inputs(inputs)).logits.numpy()
    np.testing.assert_allclose(theirs, ours, atol=1e-5)
    back, _ = read_checkpoint(directory, "hf", config, heads="required", head=head)
    for name, value in model_weights(model).items():
        np.testing.assert_array_equal(back[name], value)
    return saved
