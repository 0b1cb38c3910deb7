#!/usr/bin/env bash
# Builds the sanitizer kernel for the VM tests (make kdebug, issue 24):
# Debian's linux-source-6.1, x86_64_defconfig plus scripts/kdebug.config
# (KASAN, UBSAN, lockdep, DEBUG_ATOMIC_SLEEP, hung-task and soft-lockup
# detection; virtio, device-mapper and ext4 built in).
#
#   scripts/build-kdebug.sh              build unless cached, print the folder
#   scripts/build-kdebug.sh --print-dir  print the folder, build nothing
#
# The kernel is built once per machine into a cache outside the clone:
#   ${WBKIT_KDEBUG_CACHE:-/var/cache/wbkit}/kdebug-<source version>-<hash>
# where the hash covers the config fragment and this script's recipe
# version, so a changed fragment builds a new kernel next to the old one.
# The folder holds
#   bzImage       the kernel the VM boots
#   build/        the configured, built tree: KDIR for out-of-tree modules
#                 (make -C kmod KDIR=<folder>/build)
#   modroot/      make modules_install output (modules.builtin, modules.dep)
#   kdebug.env    VM_KERNEL, VM_KVER, VM_MODROOT and KDIR as shell assignments
#   build-seconds how long the build took
# Builds run under `nice -n 15` with KDEBUG_JOBS (default 2) jobs; a second
# caller waits on a lock and then reuses the result.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fragment=$root/scripts/kdebug.config
# Bump when the way the tree is built changes (not the fragment: it is hashed).
recipe=1
jobs=${KDEBUG_JOBS:-2}

print_only=0
case ${1:-} in
--print-dir) print_only=1 ;;
"") ;;
*)
	echo "usage: $0 [--print-dir]" >&2
	exit 2
	;;
esac

log() { echo "kdebug: $*" >&2; }

tarball=/usr/src/linux-source-6.1.tar.xz
if [ ! -r "$tarball" ]; then
	log "no $tarball (apt-get install linux-source-6.1)"
	exit 3
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || true)
[ -n "$srcver" ] || srcver=unknown

cache=${WBKIT_KDEBUG_CACHE:-/var/cache/wbkit}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/wbkit
	mkdir -p "$cache"
fi
hash=$( (cat "$fragment"; echo "recipe $recipe") | sha256sum | cut -c1-12)
dir=$cache/kdebug-$srcver-$hash

if [ "$print_only" = 1 ]; then
	echo "$dir"
	exit 0
fi

# Tools the kernel build needs beyond a C compiler.
missing=()
for tool in bc bison flex; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ -e /usr/include/libelf.h ] || missing+=(libelf-dev)
[ -e /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
if [ "${#missing[@]}" -gt 0 ]; then
	pkgs=("${missing[@]}")
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "installing ${pkgs[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2
	else
		log "missing build tools: apt-get install ${pkgs[*]}"
		exit 3
	fi
fi

# Every line of the fragment must hold in the final .config: Kconfig
# silently drops a value whose dependencies are unmet.
check_config() {
	local config=$1 line name bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			grep -qxF -- "$line" "$config" || { log "wanted $line, got: $(grep -E "^(# )?${line%%=*}[= ]" "$config" || echo absent)"; bad=1; }
			;;
		"# CONFIG_"*" is not set")
			name=${line#\# }
			name=${name%% *}
			if grep -q "^$name=" "$config"; then
				log "wanted $name off, got: $(grep "^$name=" "$config")"
				bad=1
			fi
			;;
		esac
	done <"$fragment"
	return $bad
}

build() {
	local tree=$dir/build start=$SECONDS
	rm -rf "$dir"
	mkdir -p "$tree"
	log "building in $dir (source $srcver, -j$jobs, log in $dir/build.log)"
	# Chained with &&: errexit does not apply inside a list followed by ||.
	{
		echo "== extract $tarball" &&
			tar -xJf "$tarball" -C "$tree" --strip-components=1 &&
			echo "== configure" &&
			make -C "$tree" x86_64_defconfig &&
			(cd "$tree" && scripts/kconfig/merge_config.sh -m .config "$fragment") &&
			make -C "$tree" olddefconfig
	} >"$dir/build.log" 2>&1 || { log "configuring failed, see $dir/build.log"; return 1; }
	check_config "$tree/.config" || { log "the fragment does not hold in $tree/.config"; return 1; }
	{
		echo "== build" &&
			nice -n 15 make -C "$tree" -j"$jobs" all &&
			echo "== modules_install" &&
			nice -n 15 make -C "$tree" modules_install INSTALL_MOD_PATH="$dir/modroot"
	} >>"$dir/build.log" 2>&1 || {
		log "the build failed, last lines of $dir/build.log:"
		tail -n 30 "$dir/build.log" >&2
		return 1
	}
	local krel
	krel=$(make -s -C "$tree" kernelrelease)
	cp "$tree/arch/x86/boot/bzImage" "$dir/bzImage"
	cat >"$dir/kdebug.env" <<EOF
VM_KERNEL=$dir/bzImage
VM_KVER=$krel
VM_MODROOT=$dir/modroot
KDIR=$tree
EOF
	echo $((SECONDS - start)) >"$dir/build-seconds"
	# Last: the folder counts as built only with this stamp.
	touch "$dir/.complete"
	log "built $krel in $(cat "$dir/build-seconds") s"
}

(
	flock 9
	if [ -f "$dir/.complete" ]; then
		log "cached: $dir (built in $(cat "$dir/build-seconds" 2>/dev/null || echo '?') s)"
	else
		build
	fi
) 9>"$cache/.kdebug.lock"
echo "$dir"
