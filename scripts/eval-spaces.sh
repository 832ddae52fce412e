#!/usr/bin/env bash
# Two sites' questions asked in two spaces, one engine: does every answer cite only its own
# space's site? The spaces are eval/spaces/spaces.toml's (`town`: the test site eval/site,
# `pydocs`: the real Python docs eval/realdocs/site, each read as a folder, each with its
# own persona). It starts an engine on a throwaway knowledge base and broker prefix,
# rescrapes both spaces, says hello in each (the persona's greeting), then asks each
# questions file in each space with `concierge eval --space`: in the file's own space
# judged as usual, in the other with --other-site (each question should be refused as not
# on the site, which counts as honest, and never cite the other site). Then it rescrapes
# `town` again and checks that `pydocs`'s knowledge base is byte for byte as it was and
# still answers. Last, a table: per (file, space) right or honest, and leaks (answers
# citing an address off the space's site).
#
#   scripts/eval-spaces.sh                  # the first 10 questions of each file
#   scripts/eval-spaces.sh --first 5
#   scripts/eval-spaces.sh --all            # every question (65 + 29, asked twice each)
#   scripts/eval-spaces.sh --out results/   # keep each run's JSON document there
#
# Exit 0 when every question got an answer and no answer leaked, 1 when one leaked.
# RabbitMQ must be running; model settings come from the environment, as for eval.sh.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
# shellcheck source=scripts/eval-engine.sh
source "$root/scripts/eval-engine.sh"

first=(--first 10)  # on a loaded 2-core machine a pydocs answer takes up to a minute or two
out=""
while [ $# -gt 0 ]; do
    case $1 in
        --all) first=() ;;
        --first) first=(--first "$2"); shift ;;
        --out) out=$2; shift ;;
        *) echo "eval-spaces.sh: unknown option $1 (--all, --first N, --out DIR)" >&2; exit 2 ;;
    esac
    shift
done

# Each questions file and the space whose site answers it.
files=("$root/eval/questions.jsonl" "$root/eval/realdocs/questions.jsonl")
homes=(town pydocs)
spaces=(town pydocs)

eval_engine_setup
for name in $(env | grep -o '^CONCIERGE_SITE_[A-Z_]*'); do unset "$name"; done
export CONCIERGE_SPACES_FILE="$root/eval/spaces/spaces.toml"
concierge() { "$python" -m cli.main "$@"; }
eval_engine_start

first_line() { printf '%s' "${1%%$'\n'*}"; }
for space in "${spaces[@]}"; do
    done_line=$(concierge rescrape --space "$space" 2>>"$work/terminal.log")
    echo "rescrape of $space: $(first_line "$done_line")" >&2
done
for space in "${spaces[@]}"; do
    echo "hi in $space: $(concierge ask --space "$space" "hi" 2>>"$work/terminal.log")" >&2
done

for index in "${!files[@]}"; do
    file=${files[$index]}
    home=${homes[$index]}
    for space in "${spaces[@]}"; do
        other=()
        [ "$space" = "$home" ] || other=(--other-site)
        result="$work/$(basename "$(dirname "$file")")-$(basename "$file" .jsonl)-in-$space.json"
        echo "== $file in $space ${other[*]}" >&2
        concierge eval "$file" --space "$space" "${other[@]}" "${first[@]}" --json >"$result"
        printf '%s\t%s\n' "$result" "${file#"$root"/}" >>"$work/runs.tsv"
    done
done

# A rescrape in one space leaves the other's knowledge base as it was, and it still answers.
pydocs_kb="$work/kb.pydocs.sqlite3"
before=$(sha256sum "$pydocs_kb" | cut -d' ' -f1)
concierge rescrape --space town >/dev/null 2>>"$work/terminal.log"
after=$(sha256sum "$pydocs_kb" | cut -d' ' -f1)
answer=$(concierge ask --space pydocs "When does the else clause of a for loop run?" \
    2>>"$work/terminal.log")
answer=$(first_line "$answer")
if [ "$before" = "$after" ]; then kept="unchanged"; else kept="CHANGED"; fi
echo "after a rescrape of town: pydocs's knowledge base $kept; pydocs answers: $answer" >&2

[ -z "$out" ] || { mkdir -p "$out"; cp "$work"/*.json "$work/runs.tsv" "$out"/; }

"$python" - "$work/runs.tsv" <<'PY'
import json
import sys
from pathlib import Path

print("| questions | asked in | right or honest | leaks | invented | no answer | engine s, median |")
print("|---|---|---|---|---|---|---|")
leaked = []
for line in Path(sys.argv[1]).read_text().splitlines():
    path, name = line.split("\t")
    document = json.loads(Path(path).read_text())
    summary, space = document["summary"], document["space"]
    other = document["other_site"]
    median = summary["engine_s_per_answer_median"]
    print(
        f"| {name} | {space}{' (other site)' if other else ''} | "
        f"{summary['right_or_honest']}/{summary['questions']} | {summary['leaks']} | "
        f"{summary['invented']}/{summary['not_on_site_questions']} | {summary['failed']} | "
        f"{median if median is not None else '-'} |"
    )
    leaked += [(name, space, r["id"], r["leaks"]) for r in document["results"] if r["leaks"]]
for name, space, question, addresses in leaked:
    print(f"LEAK: {name} in {space}: {question} cites {' '.join(addresses)}")
sys.exit(1 if leaked else 0)
PY
