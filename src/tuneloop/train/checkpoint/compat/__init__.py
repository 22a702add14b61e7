"""What a model folder is, read before any compute: `read_facts(MODEL_DIR)` and its table.

The preflight of every loop (`tuneloop check`, `run`) and `tuneloop doctor --compat MODEL_DIR`
read the same facts from the folder's files, without torch (so `check` stays a one-second
command): the architecture and its family (`model_type`, checked against the architectures
this transformers knows), the vocabulary, tied or untied embeddings, experts and
sliding-window layers, the tokenizer's bos/eos/pad, the chat template (where it came from and
its sha256), the token that ends an assistant turn (the template is rendered with transformers'
own Jinja renderer around a sentinel reply, and the text after it tokenized with the
`tokenizers` library), the generation config's stop ids, and whether the template renders a
system role and tools. `with_modules(facts)` adds what needs the model's modules, built on the
meta device (nothing allocated): the parameter count and the modules LoRA's `all-linear`
resolves to (PEFT's rule: every linear layer but the output head), grouped by name, so a user
sees `q_proj, k_proj, …` or Phi-3's fused `qkv_proj`. `read_shape(MODEL_DIR)` reads the
numbers memory planning needs (`tuneloop.memory.model_shape`) from the same config.json.

A folder that cannot be read this way is an `InputError` naming the file: a config.json that
is not JSON or names an architecture transformers does not know, a tokenizer without its
files. What would break a round is listed in `problems` (the preflight's errors): an eos or
end-of-turn token outside the vocabulary, a template that cannot render one exchange.
`compat_rows` is the per-step table `doctor --compat` prints (static; the README's family
matrix is what was measured).

`template.py` reads the chat template and renders it, `facts.py` the rest of the folder,
`table.py` the per-step table.
"""

from tuneloop.train.checkpoint.compat.facts import (
    ModelFacts,
    known_model_types,
    read_facts,
    read_shape,
    with_modules,
)
from tuneloop.train.checkpoint.compat.table import compat_rows, vllm_architectures
from tuneloop.train.checkpoint.compat.template import (
    SENTINEL,
    TOKENIZER_FILES,
    TemplateTokens,
    folder_template,
    read_template,
    render_problem,
    template_tokens,
)

__all__ = [
    "SENTINEL",
    "TOKENIZER_FILES",
    "ModelFacts",
    "TemplateTokens",
    "compat_rows",
    "folder_template",
    "known_model_types",
    "read_facts",
    "read_shape",
    "read_template",
    "render_problem",
    "template_tokens",
    "vllm_architectures",
    "with_modules",
]
