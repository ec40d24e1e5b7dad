#!/bin/sh
# P2's comparison of Spool against Colibri (docs/speed.md): Spool decodes
# the model in SPOOL_MODEL (reading its packs), Colibri the raw shards of
# the same model in RAW_MODEL, greedy, the same prompt, tokens checked
# equal: a warm-up run of each (Spool's first open fingerprints a new
# model; its tokens become the reference Colibri is checked against), then
# PAIRS pairs alternating Spool and Colibri, and the median of Spool's wall
# time over Colibri's. Each run is a whole process, load included. It
# prints a line per run and one JSON object at the end.
#
#   scripts/p2-pairs.sh SPOOL_MODEL RAW_MODEL COLIBRI_BIN
#
# Setup (the P2 model with trained-like codes, a packed copy, Colibri built
# outside the repository):
#
#   bin/spool gen-bench --out /tmp/p2 --sparse-layers 4 --experts 64 --codes normal
#   cp -r /tmp/p2 /tmp/p2-packed && bin/spool pack --model /tmp/p2-packed
#   (cd /work/colibri/repo/c && make colibri)
#   scripts/p2-pairs.sh /tmp/p2-packed /tmp/p2 /work/colibri/repo/c/colibri
#
# For a model on /dev/shm, copy both there first. Environment: SPOOL
# (bin/spool), PAIRS (3), MEMORY (8GiB), EXPERT_CACHE (160780288 bytes: 8.5
# experts), CAP (Colibri's expert cache slots per layer: 2, the same
# cache), PROMPT (8 ids), TOKENS (32), SPOOL_ARGS (more flags for spool
# run, e.g. to force a decode loop run with SPOOL_RANS_LOOP=avx2 in the
# environment), IDOT (Colibri's integer dot products: 0, its exact float32
# kernels, by default; where the CPU has AVX-512 VNNI its default, 1,
# quantizes activations to 8 bits and P2's greedy tokens part from the
# reference's at the third token, so the runs would not be comparable),
# DROP_CACHES (1: empty the page cache before every run, as root, so that
# both engines read from the disk: Spool reads with direct I/O, Colibri
# through the page cache, which otherwise holds the model after its first
# run; leave it unset on /dev/shm).
set -eu

if [ $# -ne 3 ]; then
	sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//; /^set -eu/d' >&2
	exit 2
fi
SPOOL_MODEL=$1
RAW_MODEL=$2
COLIBRI=$3
SPOOL=${SPOOL:-bin/spool}
PAIRS=${PAIRS:-3}
MEMORY=${MEMORY:-8GiB}
EXPERT_CACHE=${EXPERT_CACHE:-160780288}
CAP=${CAP:-2}
PROMPT=${PROMPT:-5,17,99,300,41,7,1000,12}
TOKENS=${TOKENS:-32}
SPOOL_ARGS=${SPOOL_ARGS:-}
IDOT=${IDOT:-0}
DROP_CACHES=${DROP_CACHES:-}

for f in "$SPOOL" "$COLIBRI"; do
	[ -x "$f" ] || { echo "p2-pairs: $f is not an executable" >&2; exit 2; }
done
for d in "$SPOOL_MODEL" "$RAW_MODEL"; do
	[ -f "$d/config.json" ] || { echo "p2-pairs: $d holds no model (no config.json)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }

# cold empties the page cache where DROP_CACHES asks for it.
cold() {
	[ "$DROP_CACHES" = 1 ] || return 0
	sync
	echo 3 >/proc/sys/vm/drop_caches || { echo "p2-pairs: cannot drop the page cache (not root?)" >&2; exit 2; }
}

# spool_run runs Spool once and prints its wall seconds; its token ids go
# to $work/spool.ids.
spool_run() {
	cold
	t0=$(now)
	# shellcheck disable=SC2086
	"$SPOOL" run --model "$SPOOL_MODEL" --prompt-ids "$PROMPT" --max-tokens "$TOKENS" --temperature 0 \
		--stream --memory "$MEMORY" --expert-cache "$EXPERT_CACHE" --prompt-cache off --json $SPOOL_ARGS \
		>"$work/spool.json" 2>"$work/spool.err" || { cat "$work/spool.err" >&2; exit 1; }
	t1=$(now)
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(",".join(map(str, d["token_ids"])))' \
		"$work/spool.json" >"$work/spool.ids"
	python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1"
}

# colibri_run runs Colibri once on the raw shards against the reference
# and prints its wall seconds; a token that differs fails the run.
colibri_run() {
	cold
	t0=$(now)
	SNAP="$RAW_MODEL" REF="$work/ref.json" REF_FORCE=1 MTP=0 DRAFT=0 TEMP=0 IDOT="$IDOT" "$COLIBRI" "$CAP" \
		>"$work/colibri.out" 2>"$work/colibri.err" || { tail -20 "$work/colibri.err" >&2; exit 1; }
	t1=$(now)
	grep -q "^Matching tokens: $TOKENS/$TOKENS" "$work/colibri.out" || {
		echo "p2-pairs: Colibri's tokens differ from Spool's:" >&2
		grep -E "Reference|GLM C engine|Matching" "$work/colibri.out" >&2
		exit 1
	}
	python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1"
}

# Warm-up: Spool's tokens are the reference, Colibri checked against them.
w=$(spool_run)
ref=$(cat "$work/spool.ids")
python3 -c 'import json,sys; p=[int(x) for x in sys.argv[1].split(",")]; t=[int(x) for x in sys.argv[2].split(",")]
json.dump({"prompt_ids": p, "full_ids": p + t}, open(sys.argv[3], "w"))' "$PROMPT" "$ref" "$work/ref.json"
echo "warm-up spool   $w s  tokens $ref"
w=$(colibri_run)
echo "warm-up colibri $w s  tokens identical"

ratios=""
i=1
while [ "$i" -le "$PAIRS" ]; do
	s=$(spool_run)
	[ "$(cat "$work/spool.ids")" = "$ref" ] || { echo "p2-pairs: Spool's tokens changed between runs" >&2; exit 1; }
	c=$(colibri_run)
	r=$(python3 -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$s" "$c")
	printf 'pair %d  spool %.2f s  colibri %.2f s  ratio %.3f\n' "$i" "$s" "$c" "$r"
	ratios="$ratios $r"
	i=$((i + 1))
done
python3 -c 'import json,statistics,sys
r=[float(x) for x in sys.argv[1].split()]
print(json.dumps({"spool_model": sys.argv[2], "raw_model": sys.argv[3], "pairs": len(r), "ratios": [round(x, 3) for x in r],
  "median": round(statistics.median(r), 3), "tokens_identical": True}))' "$ratios" "$SPOOL_MODEL" "$RAW_MODEL"
