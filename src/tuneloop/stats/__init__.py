"""Pure statistics shared by the report and the gate (numpy + scipy; imports nothing of ours).

Every function cites its method in its module docstring:

- `proportions`: `wilson_interval`, `mean_item_scores`, `clustered_se` (Miller 2024)
- `passk`: `pass_at_k` and curves (Chen et al. 2021, unbiased, stable product)
- `paired`: `sign_test` (exact binomial), `cohens_dz`, `flip_counts`
- `permutation`: `paired_permutation_test` (sign flips; exact, else Monte Carlo with the
  Phipson & Smyth 2010 correction)
- `bootstrap`: `paired_bootstrap_ci` (items resampled; percentile or BCa), `bootstrap_means`
- `power`: `min_detectable_effect`, `items_needed` (paired differences, Miller 2024)
- `drift`: `psi` (population stability index), `sample_psi` (over quantile bins of a sample)
- `multiplicity`: `holm_adjust` (Holm 1979 step-down, family-wise error)
- `selection`: `default_stays`, `best_mean` (one arm among several on the same items: paired
  advantage, exact sign test, per-tag non-inferiority), `holm_choice` (Holm 1979 step-down
  over several arms against one champion)
- `sequence`: error control over a whole sequence of gate rounds — `spending_alpha`,
  `spent_alpha` (alpha spending: family-wise error by the union bound) and `lord_alpha`,
  `lord_wealth`, `lord_gamma`, `lord_gammas` (LORD++, Ramdas et al. 2017: online FDR)

Conventions: float64 throughout; "greater" always means post > pre; seeds make every
resampling result reproducible.
"""

from tuneloop.stats.bootstrap import (
    bca_interval,
    bootstrap_coded_means,
    bootstrap_means,
    paired_bootstrap_ci,
    percentile_interval,
)
from tuneloop.stats.drift import psi, quantile_edges, sample_psi
from tuneloop.stats.multiplicity import holm_adjust
from tuneloop.stats.paired import RIGHT_THRESHOLD, FlipCounts, cohens_dz, flip_counts, sign_test
from tuneloop.stats.passk import pass_at_k, pass_at_k_curve, pass_at_k_matrix
from tuneloop.stats.permutation import (
    PermutationResult,
    paired_permutation,
    paired_permutation_test,
)
from tuneloop.stats.power import items_needed, min_detectable_effect
from tuneloop.stats.proportions import clustered_se, mean_item_scores, wilson_interval
from tuneloop.stats.selection import (
    UNTAGGED,
    CandidateTest,
    HolmArm,
    HolmChoice,
    PairedFigures,
    SelectionResult,
    TagDifference,
    against_default,
    best_mean,
    default_stays,
    holm_choice,
    paired_figures,
    tag_differences,
    tag_means,
)
from tuneloop.stats.sequence import (
    SPENDING_SERIES,
    lord_alpha,
    lord_gamma,
    lord_gammas,
    lord_wealth,
    spending_alpha,
    spent_alpha,
)

__all__ = [
    "RIGHT_THRESHOLD",
    "SPENDING_SERIES",
    "UNTAGGED",
    "CandidateTest",
    "FlipCounts",
    "HolmArm",
    "HolmChoice",
    "PairedFigures",
    "PermutationResult",
    "SelectionResult",
    "TagDifference",
    "against_default",
    "best_mean",
    "default_stays",
    "holm_choice",
    "paired_figures",
    "tag_differences",
    "tag_means",
    "bca_interval",
    "holm_adjust",
    "bootstrap_coded_means",
    "bootstrap_means",
    "clustered_se",
    "cohens_dz",
    "flip_counts",
    "items_needed",
    "mean_item_scores",
    "min_detectable_effect",
    "paired_bootstrap_ci",
    "paired_permutation",
    "paired_permutation_test",
    "pass_at_k",
    "pass_at_k_curve",
    "pass_at_k_matrix",
    "percentile_interval",
    "psi",
    "quantile_edges",
    "sample_psi",
    "sign_test",
    "lord_alpha",
    "lord_gamma",
    "lord_gammas",
    "lord_wealth",
    "spending_alpha",
    "spent_alpha",
    "wilson_interval",
]
