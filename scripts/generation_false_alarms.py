"""False alarms of the clean toy generator and detection of each mutant by check_generation.

    PYTHONPATH=$PWD python scripts/generation_false_alarms.py clean SEEDS N
        the clean reference generator on the whole default battery (11 settings), SEEDS runs
    PYTHONPATH=$PWD python scripts/generation_false_alarms.py mutants SEEDS N [nolp]
        each mutant on the setting where its bug shows (MUTANT_SETTINGS); ``nolp`` drops the
        reported logprobs, so only the law of the output can catch it

Prints one line per run and a summary count per engine.
"""
import sys
import time
from dataclasses import replace

from specsim.testing.generation import check_generation, default_params
from specsim.testing.generation.toy import MUTANT_SETTINGS, MUTANTS, toy_engine


def main(argv):
    what, seeds, n = argv[0], int(argv[1]), int(argv[2])
    nolp = "nolp" in argv[3:]
    for m in [None] if what == "clean" else MUTANTS:
        params = None if m is None else {MUTANT_SETTINGS[m]: default_params()[MUTANT_SETTINGS[m]]}
        fails, t0 = 0, time.time()
        for seed in range(seeds):
            eng = toy_engine(mutant=m)
            if nolp:
                inner = eng.generate
                eng = replace(eng, generate=lambda *a, inner=inner: replace(inner(*a), logprobs=None))
            res = check_generation(eng, params=params, n=n, seed=seed)
            bad = [(r.parameter, r.verdict, r.witness[:60]) for r in res.rows if r.verdict != "PASS"]
            fails += res.verdict == "FAIL"
            print(f"{m or 'clean'} seed {seed}: {res.verdict} {bad}", flush=True)
        print(f"SUMMARY {m or 'clean'}{' (no logprobs)' if nolp else ''}: {fails}/{seeds} FAIL at n={n} per side "
              f"({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
