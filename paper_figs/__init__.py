"""One script per figure; ``python -m paper_figs`` regenerates all of them.

Each figure module defines ``NAME`` and ``make(quick: bool) -> FigureResult`` (a matplotlib figure
plus its caption, which lists the command and settings that made it) and runs alone as
``python -m paper_figs.NAME [--quick] [--out DIR]``.  Outputs go to ``./paper_figs_out/`` under the
current directory (or ``--out DIR``; never into the installed package) as PNG, PDF and the caption
as .txt, deterministically (Agg backend, fixed seeds, no timestamps in the files).
"""

#: Figure modules in the order ``python -m paper_figs`` runs them.
FIGURES = [
    "fig_block_efficiency",
    "fig_tree_vs_lp",
    "fig_multidraft_real",
    "fig_real_trees",
    "fig_lossy_frontier",
    "fig_certificate_radius",
    "fig_kernel_bandwidth",
    "fig_draft_stopping",
    "fig_draft_structure",
]
