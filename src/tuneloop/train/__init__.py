"""Phase `train`: SFT / GRPO / DPO with LoRA on TRL + PEFT, merge, and checkpoint doctor.

    from tuneloop.train.run import train          # train(base, data, out_dir, settings, ...)
    from tuneloop.train.checkpoint import merge, doctor

- `run.py`: `train` (validate, refuse contamination, train in or out of process, record,
  publish); `command.py`: `tuneloop train`, `tuneloop merge`, `tuneloop doctor`;
- the method-agnostic core: `settings.py` (`TrainSettings`, `TrainRunRecord`), `data.py`
  (rows per method), `hygiene.py` (contamination), `common.py` (model, tokenizer, LoRA, TRL
  arguments), `strategy.py` (`train.distributed` as TRL arguments), and what every trainer runs
  under: `health.py` (`fit`), `budget.py` (`train.max_seconds`), `metrics.py`
  (metrics.jsonl), `resume.py` (checkpoints to resume from); `signals.py` (what counts as
  unhealthy in a training log) and `walkback.py` (after an unhealthy end, publish the newest
  healthy checkpoint);
- `methods/`: the training methods, registered in `tuneloop.registry.trainers`;
- `distributed/`: more than one process (torchrun / accelerate workers, DiLoCo replicas, the
  plain DDP reference);
- `checkpoint/`: the trained model as a checkpoint to serve (merge, doctor, decoding metadata).

Heavy libraries are imported inside the functions (and by the method modules, which only
load when a trainer runs), so importing `run` or `command` stays cheap and torch-free.
"""
