// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-writeback.c - a writeback batch: the oldest flushed segments,
 * their dirty blocks written to the backing device sorted by sector
 * (dm-wbkit-stream.c), the backing device flushed, then the segments
 * marked clean and their slots freed.
 */
#include <linux/ktime.h>
#include <linux/sort.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Writeback */

/*
 * Whether someone waits for writeback, or soon will: drop_caches, or a
 * short ring (writers wait once the slot of the next segment to open still
 * holds a segment not written back).
 */
bool wb_writeback_urgent(struct wb_device *wb)
{
	return atomic_read(&wb->drop_caches) || wb_ring_short(wb);
}

/*
 * Segments in the next batch, as dm-writeboost computes it: at most
 * nr_max_batched_writeback and the flushed segments not written back, and
 * at most one more than the ring's free slots, or as many as hold one
 * segment's worth of blocks (WB_BLOCKS_PER_SEGMENT) if that is more. While
 * foreground writes of full segments keep the ring full that is 1: a
 * writer waiting for a slot gets it after one segment, and writeback does
 * not hold the backing device for a whole batch. Small segments (one per
 * commit) go together up to a full segment's blocks: their writes are
 * sorted and queued together, where one segment of one block at a time
 * writes back at the disk's queue-depth-1 rate. As slots come free (idle,
 * drop_caches, threshold) the batch doubles up to nr_max_batched_writeback.
 * Called with wb->lock held.
 */
static unsigned int wb_batch_size(struct wb_device *wb)
{
	u64 lw = wb->last_writeback_id;
	u64 open_id = wb->cur ? wb->cur->id : wb->last_sealed_id;
	u64 n = wb->last_flushed_id - lw;
	/* The open segment's slot was free when it opened: no underflow. */
	u64 room = lw + wb->nr_segments - open_id + 1;
	unsigned int blocks = 0;
	u64 k;

	n = min_t(u64, n, READ_ONCE(wb->tunable[WB_T_NR_MAX_BATCHED_WRITEBACK]));
	n = min_t(u64, n, WB_MAX_BATCH);
	for (k = 0; k < n; k++) {
		struct wb_segment *seg = wb_seg_of_id(wb, lw + 1 + k);
		unsigned int len = seg->id == lw + 1 + k ? seg->length : 0;

		if (k >= room && blocks + len > WB_BLOCKS_PER_SEGMENT)
			break;
		blocks += len;
	}
	return (unsigned int)k;
}

/*
 * Moving averages of writeback's time per segment and per block written
 * over the last few batches, which wb_open_pace_ns paces new segments by
 * while the ring is short. Called with wb->lock held.
 */
static u64 wb_moving_average(u64 average, u64 sample)
{
	return average ? (3 * average + sample) / 4 : sample;
}

static void wb_note_writeback_time(struct wb_device *wb, u64 ns, unsigned int n,
				   unsigned int blocks)
{
	wb->writeback_ns_per_seg = wb_moving_average(wb->writeback_ns_per_seg,
						     div_u64(ns, n));
	if (blocks)
		wb->writeback_ns_per_block =
			wb_moving_average(wb->writeback_ns_per_block,
					  div_u64(ns, blocks));
}

static int wb_entry_cmp(const void *a, const void *b)
{
	const struct wb_writeback_entry *x = a, *y = b;

	if (x->sector != y->sector)
		return x->sector < y->sector ? -1 : 1;
	if (x->batch_idx != y->batch_idx)
		return x->batch_idx < y->batch_idx ? -1 : 1;
	return (int)x->idx - (int)y->idx;
}

/*
 * A segment is written back only once it is durable on the cache device:
 * written but not flushed, a power cut can take it from the log after its
 * data reached the backing device, and the superblock record (which names
 * last_writeback_id) would then name a segment the log does not hold;
 * replay would find an older copy of a block whose newer data is on the
 * backing device, and serve it as clean. One flush of the cache device
 * makes every segment written so far durable.
 */
static int wb_make_durable(struct wb_device *wb, u64 id)
{
	u64 written;
	int err;

	if (READ_ONCE(wb->last_durable_id) >= id)
		return 0;
	written = READ_ONCE(wb->last_flushed_id);
	err = wb_flush_dev(wb, WB_DEV_CACHE);
	if (err)
		return err;
	spin_lock(&wb->lock);
	if (wb->last_durable_id < written)
		WRITE_ONCE(wb->last_durable_id, written);
	spin_unlock(&wb->lock);
	return 0;
}

/*
 * Writes back the oldest flushed segments (wb_batch_size): write their
 * dirty sectors to the backing device sorted by sector, streamed from the
 * cache device or from the RAM buffers still kept (wb_stream_writeback),
 * flush the backing device, then mark them clean. Their blocks stay in
 * the lookup as clean copies.
 */
static void __wb_writeback_batch(struct wb_device *wb)
{
	struct wb_segment *segs[WB_MAX_BATCH];
	u8 lens[WB_MAX_BATCH];
	unsigned int nr = 0, nr_ahead, b, n, i, j;
	blk_opf_t write_opf = REQ_OP_WRITE;
	u64 lw, durable_id, start_ns = ktime_get_ns();
	bool tombstones_written;	/* or need not be: see wb_discard */
	sector_t err_sector = 0;
	int err;

	/*
	 * When someone waits for it, the batch's writes go out as O_DIRECT
	 * writes do, past the backing queue's writeback throttling (blk-wbt
	 * caps plain writes at a depth it scales by their latency): the disk
	 * gets all of them to reorder, and its queue stays full while the
	 * next ones are on their way. Background writeback (the threshold)
	 * stays throttled like buffered writeback, so foreground reads of the
	 * backing device keep their latency.
	 */
	if (wb_writeback_urgent(wb))
		write_opf |= REQ_SYNC | REQ_IDLE;

	spin_lock(&wb->lock);
	lw = wb->last_writeback_id;
	n = wb_batch_size(wb);
	if (!n) {
		spin_unlock(&wb->lock);
		return;
	}
	WRITE_ONCE(wb->nr_cur_batched, n);
	/*
	 * A discarded copy is skipped once every tombstone is on the cache
	 * device, made durable below with the batch: without a passdown, a
	 * tombstone lost at a power cut after its block's segment counted
	 * written back would leave the block to older data on the backing
	 * device.
	 */
	tombstones_written = wb->discard_passdown ||
			     (!wb->tombstones_pending &&
			      wb->last_tombstone_id <= wb->last_flushed_id);
	durable_id = lw + n;
	for (b = 0; b < n; b++) {
		struct wb_segment *seg = wb_seg_of_id(wb, lw + 1 + b);

		segs[b] = seg;
		/* A flushed segment owns its slot until it is written back. */
		lens[b] = seg->id == lw + 1 + b ? seg->length : 0;
		for (j = 0; j < lens[b]; j++) {
			struct wb_metablock *mb = &seg->mb[j];

			/*
			 * Every dirty entry, even one superseded at run time:
			 * the newer copy (which holds all its dirty sectors)
			 * may not be on the cache device yet, and once this
			 * segment counts as written back, replay no longer
			 * brings this data back. The newer copy is written
			 * back later, in id order. Entries superseded during
			 * replay are skipped: docs/FORMAT.md makes them obsolete.
			 */
			if (!mb->dirty || mb->obsolete)
				continue;
			if (mb->discarded && tombstones_written) {
				if (!wb->discard_passdown)
					durable_id = max(durable_id, wb->last_tombstone_id);
				continue;
			}
			wb->writeback_entries[nr++] = (struct wb_writeback_entry) {
				.sector = wb_mb_sector(mb),
				.batch_idx = b,
				.idx = j,
				.data_bits = mb->data_bits,
			};
		}
	}
	spin_unlock(&wb->lock);
	if (wb_make_durable(wb, durable_id))
		return;
	/* Only clean blocks (read cache, write-around): nothing to write. */
	if (!nr)
		goto written;

	sort(wb->writeback_entries, nr, sizeof(*wb->writeback_entries), wb_entry_cmp, NULL);
	nr_ahead = wb_collect_ahead(wb, lw, n, nr);
	spin_lock(&wb->lock);
	if (wb->writeback_ns_per_block)
		wb->batch_due_ns = start_ns +
				   (nr + nr_ahead) * wb->writeback_ns_per_block;
	spin_unlock(&wb->lock);

	nr += nr_ahead;
	if (nr_ahead)
		sort(wb->writeback_entries, nr, sizeof(*wb->writeback_entries),
		     wb_entry_cmp, NULL);
	err = wb_stream_writeback(wb, lw, nr, write_opf, &err_sector);
	if (wb_dead(wb))
		return;
	if (wb_err_transient(err)) {
		wb_retry_transient(wb, err);
		return;		/* the batch is written again later */
	}
	if (err) {
		wb_set_dead(wb, WB_DEV_BACKING, WB_OP_WRITE, err_sector, err);
		return;
	}

	/*
	 * The data must be durable on the backing device before the segments
	 * count as written back: from then on their slots may be overwritten
	 * and the superblock record may name them.
	 */
	err = wb_flush_dev(wb, WB_DEV_BACKING);
	if (err)
		return;

written:
	/*
	 * Clean copies keep serving reads from the cache device until their
	 * slot is reused (wb_get_cur unhashes them; the flusher waits for
	 * their readers before it overwrites the slot).
	 */
	spin_lock(&wb->lock);
	for (b = 0; b < n; b++)
		for (j = 0; j < lens[b]; j++)
			wb_mark_clean(wb, &segs[b]->mb[j]);
	for (i = 0; i < nr; i++) {
		struct wb_writeback_entry *e = &wb->writeback_entries[i];

		if (e->batch_idx >= n)
			wb_mark_clean(wb, wb_entry_mb(wb, lw, e));
	}
	WRITE_ONCE(wb->last_writeback_id, lw + n);
	wb_note_writeback_time(wb, ktime_get_ns() - start_ns, n, nr);
	spin_unlock(&wb->lock);
	wake_up_all(&wb->wait);
}

/* Called with wb->batch_lock held. */
void wb_writeback_batch_locked(struct wb_device *wb)
{
	__wb_writeback_batch(wb);
	/* Written, failed or to be written again: no longer due. */
	spin_lock(&wb->lock);
	wb->batch_due_ns = 0;
	spin_unlock(&wb->lock);
}
