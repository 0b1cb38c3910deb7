// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-forward.c - moving small segments forward in the log: their
 * dirty blocks copied into the open segment instead of written back, so
 * that O_DSYNC and fsync writers do not wait for a writeback batch per
 * slot.
 */
#include <linux/jiffies.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Moving small segments forward in the log */

/*
 * A segment at the head of the ring with at most this many dirty blocks
 * is moved forward instead of written back (wb_forward_heads): half a
 * segment. A segment that moves gathers the small ones around it and
 * moves again on its next lap while it stays at most half full, so a
 * block is copied a few times at most before a segment of it goes to the
 * backing device, and that segment is large enough to write back in one
 * sorted sweep.
 */
#define WB_FORWARD_MAX_BLOCKS	(WB_BLOCKS_PER_SEGMENT / 2)
/*
 * Whether the daemon should try wb_forward_heads: writes came in the last
 * second, the ring is within twice wb_low_slots of full and its oldest
 * segment is small (a commit sealed it early: a suspend,
 * sync_data_interval; fsync writers append to the open segment and no
 * longer leave small ones). Not a full segment whose blocks are mostly
 * clean or superseded: writing ahead cleans the segments behind a batch,
 * and moving their last dirty blocks would undo it (scenario 78). An idle
 * device changes nothing (a cache just replayed stays as upstream leaves
 * it, scenario 65). Read without the lock: wb_forward_heads looks again.
 */
bool wb_forward_wanted(struct wb_device *wb)
{
	u64 lw = READ_ONCE(wb->last_writeback_id);
	struct wb_segment *head = wb_seg_of_id(wb, lw + 1);

	if (atomic_read(&wb->drop_caches) ||
	    test_bit(WB_F_SUSPENDING, &wb->flags) ||
	    time_after_eq(jiffies, READ_ONCE(wb->last_write_jiffies) + HZ) ||
	    lw >= READ_ONCE(wb->last_flushed_id) ||
	    wb_free_slots(wb) >= 2 * wb_low_slots(wb))
		return false;
	return READ_ONCE(head->id) == lw + 1 &&
	       READ_ONCE(head->length) <= WB_FORWARD_MAX_BLOCKS;
}

/*
 * How long a move waits for a commit to make its new copies durable
 * before it makes one itself (a commit of a partly filled segment costs a
 * slot of its own; O_DSYNC and fsync writers, the ones that leave small
 * segments, commit every few milliseconds).
 */
#define WB_FORWARD_WAIT_NS	(10 * NSEC_PER_MSEC)

/*
 * A copy that a move takes along: the newest copy of its block, dirty.
 * An older dirty copy needs nothing: the newer one holds all its dirty
 * sectors and is in a segment no newer than the one the move writes to.
 * Called with wb->lock held.
 */
static bool wb_forward_needed(struct wb_metablock *mb)
{
	return mb->dirty && !mb->obsolete && wb_mb_hashed(mb);
}

/* How many of seg's first len blocks a move copies. Called with wb->lock held. */
static unsigned int wb_forward_count(struct wb_segment *seg, u8 len)
{
	unsigned int need = 0, j;

	for (j = 0; j < len; j++)
		need += wb_forward_needed(&seg->mb[j]);
	return need;
}

/*
 * The newest segment that holds anything: the open one unless it is
 * empty (an empty segment is never written). Called with wb->lock held.
 */
static u64 wb_newest_id(struct wb_device *wb)
{
	return wb->cur && wb->cur->length ? wb->cur->id : wb->last_sealed_id;
}

/*
 * Copies seg's blocks that wb_forward_needed into the open segment (one is
 * opened if none is and a slot is free, or sealed and another opened if
 * they do not fit), from data (seg's data blocks), and makes the copies the
 * newest ones. False, with nothing moved, when no slot is free
 * (the daemon must not wait for one: only it frees them). *target becomes
 * at least the newest segment holding anything (wb_newest_id): the copies,
 * and the newer copies of seg's blocks that need none. Once it is durable,
 * seg's data is in the log without seg. Called with wb->lock held; may
 * drop it.
 */
static bool wb_forward_seg(struct wb_device *wb, struct wb_segment *seg,
			   u8 len, const void *data, u64 *target)
{
	struct wb_segment *cur;
	unsigned int need, j;

	for (;;) {
		need = wb_forward_count(seg, len);
		/* Nothing to copy: no segment to open (an empty one never goes out). */
		if (!need)
			goto done;
		if (__wb_get_cur(wb, false))
			return false;
		cur = wb->cur;
		/* wb_get_cur may have dropped the lock: count again. */
		need = wb_forward_count(seg, len);
		if (cur->length + need <= WB_BLOCKS_PER_SEGMENT)
			break;
		/* Into the next segment: this one is full or nearly. */
		wb_seal(wb);
	}
	for (j = 0; j < len; j++) {
		struct wb_metablock *mb = &seg->mb[j], *nmb;
		struct wb_metablock_device *md;
		u8 idx = cur->length;

		if (!wb_forward_needed(mb))
			continue;
		nmb = &cur->mb[idx];
		/* 4 KiB under the lock, as a partial write's merge. */
		memcpy(cur->buf + WB_BLOCK_SIZE * (1 + idx),
		       data + WB_BLOCK_SIZE * j, WB_BLOCK_SIZE);
		atomic64_inc(&wb->nr_forwarded_blocks);
		wb_ht_del(wb, mb);
		wb_mb_set_sector(nmb, wb_mb_sector(mb));
		nmb->data_bits = mb->data_bits;
		nmb->dirty = true;
		nmb->obsolete = false;
		nmb->discarded = false;
		wb_ht_add(wb, nmb);
		md = cur->buf + WB_METABLOCK_OFFSET(idx);
		md->sector = cpu_to_le64(wb_mb_sector(nmb));
		md->dirty_bits = nmb->data_bits;
		cur->length++;
	}
done:
	*target = max(*target, wb_newest_id(wb));
	return true;
}

/*
 * The data of the segments a move forward copies, into wb->stream one
 * after the other (data[b]; the caller keeps their blocks within
 * WB_STREAM_BLOCKS): from a segment that kept its RAM buffer the blocks
 * the move copies (wb_forward_needed, which only ever turns false) are
 * copied under the lock, the others are read whole from the cache device.
 * Nothing borrows a kept buffer: the move's own wb_get_cur may need one
 * back. Returns 0, or the error that killed the target.
 */
static int wb_forward_read(struct wb_device *wb, struct wb_segment **segs,
			   const bool *has_dirty, const u8 *lens,
			   unsigned int n, void **data)
{
	bool from_dev[WB_MAX_BATCH];
	unsigned int b, j, used = 0;
	struct wb_aio aio;
	int err;

	for (b = 0; b < n; b++) {
		struct wb_segment *seg = segs[b];

		data[b] = wb->stream + used * WB_BLOCK_SIZE;
		from_dev[b] = false;
		if (!has_dirty[b])
			continue;
		used += lens[b];
		spin_lock(&wb->lock);
		from_dev[b] = !seg->buf;
		for (j = 0; seg->buf && j < lens[b]; j++)
			if (wb_forward_needed(&seg->mb[j]))
				memcpy(data[b] + j * WB_BLOCK_SIZE,
				       seg->buf + WB_BLOCK_SIZE * (1 + j),
				       WB_BLOCK_SIZE);
		spin_unlock(&wb->lock);
	}
	do {
		wb_aio_init(&aio);
		for (b = 0; b < n; b++)
			if (from_dev[b])
				wb_aio_submit(wb, &aio, WB_DEV_CACHE, REQ_OP_READ,
					      wb_data_block_sector(segs[b]->slot, 0),
					      data[b],
					      lens[b] * WB_BLOCK_SIZE);
		err = wb_aio_wait(&aio);
	} while (wb_retry_transient(wb, err));
	if (err) {
		wb_set_dead(wb, WB_DEV_CACHE, WB_OP_READ, aio.err_sector, err);
		return err;
	}
	for (b = 0; b < n; b++)
		if (from_dev[b])
			invalidate_kernel_vmap_range(data[b],
						     lens[b] * WB_BLOCK_SIZE);
	return 0;
}

/*
 * Moves small segments at the head of the ring forward in the log instead
 * of writing them back: their newest dirty copies go into the open
 * segment, and once that segment is durable they count as written back
 * without a write to the backing device. Small segments are what O_DSYNC
 * and fsync writers leave (a commit each); each takes a slot, so a ring of
 * them fills after as many commits, and writing them back costs the
 * backing device a seek per block in batches of a few dozen blocks, which
 * every commit then waits for. Moved, their blocks gather in fuller
 * segments, which go to the backing device once they hold more than
 * WB_FORWARD_MAX_BLOCKS, in larger sorted batches and later. The cost is
 * the copy: each commit's segment carries the blocks moved into it.
 *
 * Crash safety is a writeback's: the segments count as written back (and
 * the superblock record may name them, and their slots be reused) only
 * once the segment holding the new copies is durable, and with it every
 * segment before it, which holds the newer copies of the blocks not
 * moved. Until then the old copies are in the log and replay finds both;
 * the newer wins, with the same data. Returns whether it moved any;
 * called with batch_lock held.
 */
bool wb_forward_heads(struct wb_device *wb)
{
	struct wb_segment *segs[WB_MAX_BATCH];
	void *data[WB_MAX_BATCH];	/* each segment's data blocks */
	u8 lens[WB_MAX_BATCH];
	bool has_dirty[WB_MAX_BATCH];
	unsigned int n, k, j, room, nr_blocks = 0, nr_read = 0;
	bool fresh;
	u64 lw, target = 0;
	u8 target_len;

	if (!wb_forward_wanted(wb))
		return false;
	spin_lock(&wb->lock);
	lw = wb->last_writeback_id;
	room = WB_BLOCKS_PER_SEGMENT - (wb->cur ? wb->cur->length : 0);
	fresh = !wb->cur || !wb->cur->length;
	for (n = 0; n < WB_MAX_BATCH && lw + 1 + n <= wb->last_flushed_id; n++) {
		struct wb_segment *seg = wb_seg_of_id(wb, lw + 1 + n);
		u8 len = seg->id == lw + 1 + n ? seg->length : 0;
		unsigned int need = wb_forward_count(seg, len);

		/*
		 * Whole segments are read, into wb->stream; one with nothing
		 * to copy is not read at all.
		 */
		if (need > WB_FORWARD_MAX_BLOCKS ||
		    (need && nr_read + len > WB_STREAM_BLOCKS))
			break;
		/*
		 * fsync writers fill the open segment (they append to it):
		 * the first copies may seal it and take a segment of their own
		 * (wb_forward_seg).
		 */
		if (nr_blocks + need > room) {
			if (nr_blocks)
				break;
			room = WB_BLOCKS_PER_SEGMENT;
			fresh = true;
		}
		nr_blocks += need;
		nr_read += need ? len : 0;
		segs[n] = seg;
		lens[n] = len;
		has_dirty[n] = need;
	}
	/*
	 * Nothing to copy: a writeback batch frees them as cheaply. Into an
	 * empty segment a move of one segment frees no slot (the move may
	 * have to commit the segment itself), and an idle device would go
	 * on moving it.
	 */
	if (!nr_blocks || (n < 2 && fresh)) {
		spin_unlock(&wb->lock);
		return false;
	}
	spin_unlock(&wb->lock);

	if (wb_forward_read(wb, segs, has_dirty, lens, n, data))
		return true;

	for (k = 0; k < n; k++) {
		bool moved;

		/* Up to half a segment copied under the lock, then a break. */
		spin_lock(&wb->lock);
		moved = wb_forward_seg(wb, segs[k], lens[k], data[k],
				       &target);
		spin_unlock(&wb->lock);
		if (!moved)
			break;
	}
	if (!k)
		return false;

	/* Copies into the open segment are durable once an append took them. */
	spin_lock(&wb->lock);
	target_len = wb->cur && wb->cur->id == target ? wb->cur->length :
							WB_COMMIT_WHOLE;
	spin_unlock(&wb->lock);
	wait_event_hrtimeout(wb->wait, wb_is_durable(wb, target, target_len) ||
			     wb_dead(wb), ns_to_ktime(WB_FORWARD_WAIT_NS));
	if (!wb_is_durable(wb, target, target_len)) {
		wb_commit_open(wb);
		wb_wait_io(wb->wait, wb_is_durable(wb, target, target_len) ||
			   wb_dead(wb));
	}
	if (wb_dead(wb))
		return true;

	spin_lock(&wb->lock);
	for (n = 0; n < k; n++)
		for (j = 0; j < lens[n]; j++)
			wb_mark_clean(wb, &segs[n]->mb[j]);
	WRITE_ONCE(wb->last_writeback_id, lw + k);
	spin_unlock(&wb->lock);
	atomic64_add(k, &wb->nr_forwarded_segs);
	wake_up_all(&wb->wait);
	return true;
}
