#!/usr/bin/env bash
# Measure answer quality in one command: serve the site beside the questions file (its folder's
# site/: eval/site for the test site, eval/realdocs/site for the real documentation) on a
# free local port, start an engine on a throwaway knowledge base and broker prefix,
# rescrape, then run `concierge eval` on the questions file. Everything it started is
# stopped when it ends.
#
#   scripts/eval.sh                         # eval/questions.jsonl, as a table
#   scripts/eval.sh eval/heldout.jsonl --json
#   scripts/eval.sh eval/realdocs/questions.jsonl
#   CONCIERGE_SPACES_FILE=eval/spaces/spaces.toml scripts/eval.sh eval/questions.jsonl --space town
#
# With `--space NAME` (and CONCIERGE_SPACES_FILE) it asks in that space, whose site is the
# spaces file's (nothing is served): it rescrapes that space, and the eval counts the answers
# citing an address off its site (leaks). Every other option goes to `concierge eval` too
# (--first N, --other-site, --json). Scripts/eval-spaces.sh asks two sites' questions in two
# spaces.
#
# The engine and the eval read the same CONCIERGE_* settings from the environment (the model,
# CONCIERGE_TEMPERATURE, CONCIERGE_MAX_TOKENS, ...), so set them once, before this script.
# RabbitMQ must be running (CONCIERGE_BROKER_URL, default the local one).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
# shellcheck source=scripts/eval-engine.sh
source "$root/scripts/eval-engine.sh"
file=${1:-$root/eval/questions.jsonl}
shift || true

space=""
args=("$@")
for index in "${!args[@]}"; do
    case ${args[$index]} in
        --space) space=${args[$((index + 1))]:-} ;;
        --space=*) space=${args[$index]#--space=} ;;
    esac
done

eval_engine_setup
if [ -z "$space" ]; then
    site="$(cd "$(dirname "$file")" && pwd)/site"
    [ -f "$site/sitemap.xml" ] || { echo "eval.sh: no site/sitemap.xml beside $file" >&2; exit 2; }
    port=$(free_port)
    export CONCIERGE_SITE_SITEMAP_URL="http://127.0.0.1:$port/sitemap.xml"
    "$python" -m http.server "$port" --bind 127.0.0.1 --directory "$site" \
        >"$work/site.log" 2>&1 &
    pids+=($!)
else
    [ -n "${CONCIERGE_SPACES_FILE:-}" ] || { echo "eval.sh: --space needs CONCIERGE_SPACES_FILE" >&2; exit 2; }
fi
eval_engine_start

if [ -z "$space" ]; then
    while_engine_runs "$python" -m cli.main rescrape >/dev/null
else
    while_engine_runs "$python" -m cli.main rescrape --space "$space" >/dev/null
fi
while_engine_runs "$python" -m cli.main eval "$file" "$@"
