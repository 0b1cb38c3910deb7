#!/usr/bin/env bash
# Checks that the module's files call each other without a cycle, and
# prints the file-level call graph in layers.
#
#   scripts/check-kmod-calls.sh [--no-build]
#
# Builds the module (make -C kmod, against the running kernel's headers
# unless KDIR says otherwise), or with --no-build takes the objects a build
# left in kmod/. Each kmod/dm-wbkit-*.c has an object, and nm tells the
# global symbols it defines from the ones it uses undefined: a file
# depends on another when it uses a symbol the other defines. Functions
# taken by address (work functions, kthread entry points, the target's
# hooks) are undefined symbols too, so they count as calls.
#
# Layer 0 depends on no other file of the module; layer n only on lower
# layers. The layers are what lets a reader draw the call graph from the
# file names (kmod/README.md, "Layout"), and a cycle would mean two
# files that each need the other: the script names one and fails.
# Exit 0 when acyclic, 1 on a cycle, 3 when the objects are missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "${1:-}" != --no-build ]; then
	make -s -C kmod >/dev/null ||
		{ echo "check-kmod-calls: make -C kmod failed" >&2; exit 3; }
fi

files=()
for c in kmod/dm-wbkit-*.c; do
	o=${c%.c}.o
	if [ ! -f "$o" ]; then
		echo "check-kmod-calls: $o missing (run make -C kmod)" >&2
		exit 3
	fi
	files+=("$o")
done

# One "def|use <file> <symbol>" line per global symbol of each object.
for o in "${files[@]}"; do
	f=$(basename "$o" .o)
	nm "$o" | awk -v f="$f" '
		$1 == "U" { print "use", f, $2; next }
		$2 ~ /^[TDBRCGSVW]$/ { print "def", f, $3 }'
done | awk '
	$1 == "def" { owner[$3] = $2; node[$2] = 1; next }
	{ node[$2] = 1; uses[n++] = $2 " " $3 }
	END {
		for (i = 0; i < n; i++) {
			split(uses[i], u, " ")
			to = owner[u[2]]
			if (to == "" || to == u[1])
				continue
			e = u[1] " " to
			if (!(e in edge))
				nout[u[1]]++
			edge[e] = edge[e] (edge[e] == "" ? "" : " ") u[2]
		}
		# Kahn, a layer at a time: a file joins once all it calls is placed.
		left = 0
		for (f in node)
			left++
		for (layer = 0; left; layer++) {
			line = ""
			nl = 0
			for (f in node) {
				if (f in placed)
					continue
				ok = 1
				for (e in edge) {
					split(e, p, " ")
					if (p[1] == f && !(p[2] in placed))
						ok = 0
				}
				if (ok)
					now[nl++] = f
			}
			if (!nl)
				break
			# Sorted, so the output is stable.
			for (i = 0; i < nl; i++)
				for (j = i + 1; j < nl; j++)
					if (now[j] < now[i]) {
						t = now[i]; now[i] = now[j]; now[j] = t
					}
			printf "layer %d:\n", layer
			for (i = 0; i < nl; i++) {
				f = now[i]
				deps = ""
				for (e in edge) {
					split(e, p, " ")
					if (p[1] == f)
						deps = deps " " p[2]
				}
				ndeps = split(deps, d, " ")
				for (a = 1; a <= ndeps; a++)
					for (b = a + 1; b <= ndeps; b++)
						if (d[b] < d[a]) {
							t = d[a]; d[a] = d[b]; d[b] = t
						}
				deps = ""
				for (a = 1; a <= ndeps; a++)
					deps = deps (a > 1 ? ", " : "") d[a]
				printf "  %s%s\n", f, ndeps ? " -> " deps : ""
			}
			for (i = 0; i < nl; i++) {
				placed[now[i]] = layer
				left--
			}
		}
		if (!left)
			exit 0
		# Every file left calls another one left: walk until one repeats.
		for (f in node)
			if (!(f in placed)) {
				start = f
				break
			}
		f = start
		while (!(f in seen)) {
			seen[f] = ++step
			path[step] = f
			for (e in edge) {
				split(e, p, " ")
				if (p[1] == f && !(p[2] in placed)) {
					next_f[f] = p[2]
					break
				}
			}
			f = next_f[f]
		}
		msg = f
		for (i = seen[f]; i <= step; i++) {
			g = path[i]
			h = next_f[g]
			msg = msg " -> " h
			why = why sprintf("  %s -> %s: %s\n", g, h, edge[g " " h])
		}
		printf "check-kmod-calls: cycle: %s\n%s", msg, why > "/dev/stderr"
		exit 1
	}'
echo "check-kmod-calls: ${#files[@]} files, no cycle"
