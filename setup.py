"""ALBERT for TensorFlow 2 / Keras 3.

    pip install -e .            # the library and scripts
    pip install -e ".[demo]"    # + the offline demo corpus (python -m albert.demo)
    pip install -e ".[onnx]"    # + ONNX export (python -m albert.export --onnx)
    pip install -e ".[gpu]"     # + the CUDA libraries TensorFlow needs on NVIDIA GPUs
    pip install -e ".[keras_hub]"  # + KerasHub presets (--output_format / --input_format=keras_hub)
    pip install -e ".[beam]"    # + Apache Beam (create_pretraining_data.py --beam_pipeline_options)
    pip install -e ".[test]"    # + the test suite's references (PyTorch CPU, transformers)
"""

import os

from setuptools import find_packages, setup

# The library's own requirements live in albert/requirements.txt, where the original's
# documented `pip install -r albert/requirements.txt` finds them.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "albert", "requirements.txt"),
          encoding="utf-8") as requirements_file:
    INSTALL_REQUIREMENTS = [line.strip() for line in requirements_file
                            if line.strip() and not line.strip().startswith("#")]

# The demo corpus: real text shipped in the gensim 4.4.0 wheel (read as data
# files; gensim is never imported), wiki markup removal and sentence
# splitting; matplotlib draws the reproduced paper tables' plots. Library
# users do not need them.
DEMO_REQUIREMENTS = ["gensim==4.4.0", "mwparserfromhell>=0.6", "syntok>=1.4", "matplotlib>=3.5"]
# python -m albert.export --onnx: tf2onnx converts, onnxruntime runs the file.
ONNX_REQUIREMENTS = ["tf2onnx>=1.16", "onnxruntime>=1.17"]
# The keras_hub checkpoint format: KerasHub's own classes build, save and load the presets.
KERAS_HUB_REQUIREMENTS = ["keras-hub==0.32.0"]
# create_pretraining_data.py on Apache Beam (its local FnApiRunner works offline; Dataflow needs
# apache-beam[gcp] on the workers, which the user's own container or requirements provide).
# Beam's own pins, not ours, cap protobuf and Pillow: apache-beam 2.77.0 requires
# "protobuf!=4.0.*,...,<7.0.0.dev0,>=3.20.3" and "pillow<13,>=12.1.1", so the beam and test extras
# downgrade protobuf 7 and Pillow 13. (`pip install -e .` caps neither on Python 3.11+; on 3.10
# tensorflow-metadata, through tf-models-official, requires protobuf<=6.32.)
BEAM_REQUIREMENTS = ["apache-beam>=2.60,<3"]

setup(
    name="albert-tf2",
    version="0.1.0",
    description="A faithful TensorFlow 2 / Keras 3 reproduction of ALBERT (Lan et al., ICLR 2020)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["albert", "albert.*"]),
    py_modules=["convert_checkpoint", "create_pretraining_data", "run_classifier",
                "run_pretraining", "run_race", "run_squad", "run_squad_v1", "run_squad_v2",
                "run_token_classifier"],
    install_requires=INSTALL_REQUIREMENTS,
    extras_require={
        "demo": DEMO_REQUIREMENTS,
        "onnx": ONNX_REQUIREMENTS,
        # TensorFlow's own CUDA extra, at the pinned version (docs/accelerators.md).
        "gpu": ["tensorflow[and-cuda]==2.20.*"],
        "keras_hub": KERAS_HUB_REQUIREMENTS,
        # create_pretraining_data.py --beam_pipeline_options (docs/pretraining_data.md).
        "beam": BEAM_REQUIREMENTS,
        # torch 2.13.0 is the CPU build available on the project's machines;
        # an unpinned torch would pull several GB of CUDA packages.
        # scipy and scikit-learn: independent references for the GLUE metrics.
        # setuptools < 81: tensorflow-hub 0.16 imports pkg_resources (hub.KerasLayer tests).
        # pytest-xdist: the suite runs on every core (pytest.ini); pytest-cov: docs/testing.md.
        "test": ["pytest>=8", "pytest-xdist>=3.5", "pytest-cov>=5", "torch==2.13.0",
                 "transformers>=5,<6", "scipy>=1.10", "scikit-learn>=1.3", "setuptools<81",
                 *DEMO_REQUIREMENTS, *ONNX_REQUIREMENTS, *KERAS_HUB_REQUIREMENTS,
                 *BEAM_REQUIREMENTS],
    },
)
