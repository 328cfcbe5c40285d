#!/usr/bin/env bash
# Rename the modules called `memory.py` or `model.py` whose name does not say their role in
# their package, and rewrite every import and reference to them.
#
#   tools/rename_by_role.sh            # from anywhere inside the checkout
#
# What moves (the per-section modules of report/adapters, report/sections and report/terminal,
# and the command cli/memory.py, are named by their section or command and stay):
#
#   analyze/memory.py        -> analyze/memory_fit.py          memory(batch) lines, the largest batch
#   engine/memory.py         -> engine/peak_memory.py          a run's peak memory (host, device)
#   tune/memory.py           -> tune/fit_decisions.py          the memory ladder's decisions
#   collect/probes/memory.py -> collect/probes/step_memory.py  a script's step memory to owners
#   collect/inject/model.py  -> collect/inject/trained_model.py  the trained module, model knobs
#   knobs/model.py           -> knobs/model_recipe.py          a recipe applied to an nn.Module
#   scale/model.py           -> scale/projection.py            the scaling model T(N), projections
#   report/model.py          -> report/views.py                the report's view model
#   tests/unit/scale/test_model.py -> tests/unit/scale/test_projection.py (tests mirror modules)
#
# References are rewritten in the tracked files under src, tests, benchmarks and docs, and in
# README.md (`git grep`, so git-ignored third-party scripts under benchmarks/scripts are left
# alone), in both spellings: dotted (`torchdoctor.scale.model`, `tune.memory.next_batch`) and
# as a path (`scale/model.py`), each bounded by word boundaries so that `analyze.memory_study`,
# `report/adapters/memory.py` or `cli/memory.py` are not touched. CHANGELOG.md keeps the names
# its past entries were written with. Then `ruff format` and `ruff check --fix` on the changed
# files (import order moves with the new names), a comment or docstring line the longer names
# push past the line length carried onto the next (tools/rewrap_prose.py), and a last
# `ruff check` that must pass.
#
# Refuses to run on a tree with uncommitted changes, or when a module to move is missing or its
# new name is taken, before anything is changed.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
ruff=${RUFF:-ruff}
python=${PYTHON:-python3}
if ! command -v "$ruff" >/dev/null 2>&1; then
    if [[ -x .venv/bin/ruff ]]; then ruff=.venv/bin/ruff; else
        echo "rename_by_role: ruff not found; set RUFF=/path/to/ruff" >&2; exit 2; fi
fi

# old module path (under src/torchdoctor) | new module path
moves=(
    "analyze/memory.py|analyze/memory_fit.py"
    "engine/memory.py|engine/peak_memory.py"
    "tune/memory.py|tune/fit_decisions.py"
    "collect/probes/memory.py|collect/probes/step_memory.py"
    "collect/inject/model.py|collect/inject/trained_model.py"
    "knobs/model.py|knobs/model_recipe.py"
    "scale/model.py|scale/projection.py"
    "report/model.py|report/views.py"
)
test_moves=(
    "tests/unit/scale/test_model.py|tests/unit/scale/test_projection.py"
)
scope=(src tests benchmarks docs README.md)

if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
    echo "rename_by_role: the tree has uncommitted changes; commit or set them aside first" >&2
    exit 2
fi
for pair in "${moves[@]}"; do
    old=src/torchdoctor/${pair%%|*}; new=src/torchdoctor/${pair##*|}
    [[ -f $old ]] || { echo "rename_by_role: $old is missing (renamed already?)" >&2; exit 2; }
    [[ ! -e $new ]] || { echo "rename_by_role: $new exists already" >&2; exit 2; }
    # A submodule is an attribute of its package once imported: a name the package's
    # __init__ exports (a function `model_transforms`) would be shadowed by the module.
    if grep -qw "$(basename "$new" .py)" "$(dirname "$new")/__init__.py"; then
        echo "rename_by_role: $(dirname "$new")/__init__.py already names" \
            "$(basename "$new" .py); choose another module name" >&2
        exit 2
    fi
done
for pair in "${test_moves[@]}"; do
    old=${pair%%|*}; new=${pair##*|}
    [[ -f $old ]] || { echo "rename_by_role: $old is missing (renamed already?)" >&2; exit 2; }
    [[ ! -e $new ]] || { echo "rename_by_role: $new exists already" >&2; exit 2; }
done

# The sed program: for each move, its dotted and its path spelling. `package/module` is the
# last two parts of the path (`probes/memory`), enough to be unique among the tree's modules.
sed_args=()
patterns=()
for pair in "${moves[@]}"; do
    old=${pair%%|*}; new=${pair##*|}
    old_tail=$(basename "$(dirname "$old")")/$(basename "$old" .py)   # e.g. probes/memory
    new_tail=$(basename "$(dirname "$new")")/$(basename "$new" .py)   # e.g. probes/step_memory
    old_dot=${old_tail/\//.}; new_dot=${new_tail/\//.}
    old_dot_re=${old_dot//./\\.}
    sed_args+=(-e "s#\\b${old_dot_re}\\b#${new_dot}#g")
    sed_args+=(-e "s#\\b${old_tail}\\.py\\b#${new_tail}.py#g")
    patterns+=("\\b${old_dot_re}\\b" "\\b${old_tail}\\.py\\b")
done
for pair in "${test_moves[@]}"; do
    old=${pair%%|*}; new=${pair##*|}
    old_tail=$(basename "$(dirname "$old")")/$(basename "$old")      # scale/test_model.py
    new_tail=$(basename "$(dirname "$new")")/$(basename "$new")
    sed_args+=(-e "s#\\b${old_tail//./\\.}\\b#${new_tail}#g")
    patterns+=("\\b${old_tail//./\\.}\\b")
done

# Files that mention any of them (before the moves, so the moved files' own text counts too).
grep_args=()
for p in "${patterns[@]}"; do grep_args+=(-e "$p"); done
mapfile -t files < <(git grep -lP "${grep_args[@]}" -- "${scope[@]}" || true)

for pair in "${moves[@]}"; do
    git mv "src/torchdoctor/${pair%%|*}" "src/torchdoctor/${pair##*|}"
done
for pair in "${test_moves[@]}"; do
    git mv "${pair%%|*}" "${pair##*|}"
done

changed=()
for f in "${files[@]}"; do
    for pair in "${moves[@]}" "${test_moves[@]}"; do   # a file that moved is edited where it is now
        old=${pair%%|*}; new=${pair##*|}
        [[ $f == "src/torchdoctor/$old" ]] && f="src/torchdoctor/$new"
        [[ $f == "$old" ]] && f="$new"
    done
    sed -i -E "${sed_args[@]}" "$f"
    changed+=("$f")
done

mapfile -t py < <(printf '%s\n' "${changed[@]}" | grep '\.py$' || true)
if ((${#py[@]})); then
    "$ruff" format --quiet "${py[@]}"
    "$ruff" check --fix --quiet --exit-zero "${py[@]}" >/dev/null
    # A longer name can push a comment or docstring line past the line length.
    "$python" tools/rewrap_prose.py "${py[@]}"
fi

left=$(git grep -nP "${grep_args[@]}" -- "${scope[@]}" || true)
if [[ -n $left ]]; then
    echo "rename_by_role: references left under the old names:" >&2
    echo "$left" >&2
    exit 1
fi
echo "rename_by_role: ${#moves[@]} modules and ${#test_moves[@]} test file moved; ${#changed[@]} files rewritten"
"$ruff" check src tests benchmarks
