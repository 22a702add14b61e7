"""tuneloop: the closed improvement loop for language models.

Serve a model, evaluate it on a frozen suite, train (SFT / GRPO / DPO with LoRA), merge,
re-serve and re-evaluate under identical settings, decide with paired statistics whether the
new model beats the champion, and archive the run with full provenance.
"""

__version__ = "0.1.0"
