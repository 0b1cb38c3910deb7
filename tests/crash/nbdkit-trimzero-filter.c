/*
 * nbdkit-trimzero-filter: a trim becomes a zero of the same range, sent to
 * the layer below. powercut.sh stacks it over the cache filter, so a guest
 * discard behaves as the crash suites' model wants it: the range reads zeros
 * at once, and the zeros stay in the disk's volatile cache until the guest
 * flushes, like any write.
 *
 * Why a filter: the cache filter passes a trim straight to the plugin,
 * bypassing the blocks it holds (NBD lets a trim leave any content), so a
 * read after the discard could still see the old data and a cut could keep
 * a discard that was never flushed. Neither is a disk the guest could rely
 * on, and wbstamp's verify (a durable discard reads zeros) needs one.
 *
 *   nbdkit -U sock --filter=./nbdkit-trimzero-filter.so --filter=cache \
 *       file IMG cache=writeback
 */
#include <errno.h>
#include <stdint.h>

#include <nbdkit-filter.h>

static int trimzero_prepare(nbdkit_next *next, void *handle, int readonly)
{
	if (!readonly && next->can_zero(next) == NBDKIT_ZERO_NONE) {
		nbdkit_error("trimzero: the layer below cannot zero");
		return -1;
	}
	return 0;
}

static int trimzero_can_trim(nbdkit_next *next, void *handle)
{
	return 1;
}

static int trimzero_trim(nbdkit_next *next, void *handle, uint32_t count, uint64_t offset, uint32_t flags,
			 int *err)
{
	/* Not NBDKIT_FLAG_MAY_TRIM: the zeros must be written, not a hole
	 * punched under the cache filter. */
	return next->zero(next, count, offset, flags & NBDKIT_FLAG_FUA, err);
}

static struct nbdkit_filter filter = {
	.name = "trimzero",
	.longname = "wbkit's trim-to-zero filter",
	.prepare = trimzero_prepare,
	.can_trim = trimzero_can_trim,
	.trim = trimzero_trim,
};

NBDKIT_REGISTER_FILTER(filter)
