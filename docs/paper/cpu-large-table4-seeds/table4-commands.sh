#!/bin/sh
# Every step of this table, in order (cd to the repository first).
set -e

