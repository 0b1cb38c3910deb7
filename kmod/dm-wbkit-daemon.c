// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-daemon.c - background work: writeback of flushed segments to the
 * backing device, the superblock record and the periodic data sync.
 */
#include <linux/jiffies.h>
#include <linux/part_stat.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Writeback */

/*
 * Free slots of the ring from the next segment to open on (the open one's
 * slot was free when it opened, so this cannot underflow).
 */
static u64 wb_free_slots(struct wb_device *wb)
{
	struct wb_segment *cur = READ_ONCE(wb->cur);
	u64 next = cur ? cur->id + 1 : READ_ONCE(wb->last_sealed_id) + 1;
	u64 end = READ_ONCE(wb->last_writeback_id) + wb->nr_segments;

	return end + 1 > next ? end + 1 - next : 0;
}

/*
 * Free slots below which writeback starts before anyone waits: a batch
 * (nr_max_batched_writeback segments), at most a quarter of the ring. Small
 * segments (a commit each: O_DSYNC and fsync writers) use a slot apiece,
 * so the ring fills after as many commits; waiting until it is full would
 * make each such writer wait for a whole batch, while starting a batch
 * earlier lets it go on in the slots still free (writeback then runs
 * beside the writes instead of between them). Full segments leave the
 * ring full all the time under load, where this changes nothing.
 */
static u64 wb_low_slots(struct wb_device *wb)
{
	return min_t(u64, READ_ONCE(wb->tunable[WB_T_NR_MAX_BATCHED_WRITEBACK]),
		     max_t(u64, wb->nr_segments / 4, 1));
}

/* Fewer free slots than wb_low_slots: writeback runs, new segments are paced. */
bool wb_ring_short(struct wb_device *wb)
{
	return wb_free_slots(wb) < wb_low_slots(wb);
}

/*
 * How long after the segment about to open the next one may open while
 * the ring is short (wb_pace_open): the time the batch in progress still
 * needs (its blocks, those written ahead included, at writeback's recent
 * time per block) shared among the free slots left after this one, so the
 * last of them opens about when the batch ends and frees its own. A pause
 * of writeback's average time per segment matches the rate slots come
 * free over many batches, but within one they all come free at its end:
 * paced so, writers took the free slots in the first part of a 1.2 s
 * batch and waited 400 to 760 ms for the rest (bench/vm-peers.sh steady,
 * 32 MiB cache). With no batch in progress, or one past its due time (it
 * may end any moment), the average per segment. Called with wb->lock held.
 */
u64 wb_open_pace_ns(struct wb_device *wb, u64 now)
{
	u64 due = wb->batch_due_ns;
	u64 free = wb_free_slots(wb);

	if (!due || due <= now)
		return wb->writeback_ns_per_seg;
	/* The slot about to open is one of them; the last opens when due. */
	return div64_u64(due - now, free > 1 ? free - 1 : 1);
}

/*
 * Whether someone waits for writeback, or soon will: drop_caches, or a
 * short ring (writers wait once the slot of the next segment to open still
 * holds a segment not written back).
 */
static bool wb_writeback_urgent(struct wb_device *wb)
{
	return atomic_read(&wb->drop_caches) || wb_ring_short(wb);
}

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
 * segment is small. An idle device changes nothing (a cache just replayed
 * stays as upstream leaves it, scenario 65). Read without the lock:
 * wb_forward_heads looks again.
 */
static bool wb_forward_wanted(struct wb_device *wb)
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
 * Whether the daemon has work: flushed segments not yet written back, and
 * a reason to write them now: an urgent one (wb_writeback_urgent), small
 * ones to move forward (wb_forward_wanted) or, as
 * in dm-writeboost, a backing device busy less than writeback_threshold
 * percent of the last second (wb_update_writeback_allowed; 0 = never in
 * the background).
 */
bool wb_should_writeback(struct wb_device *wb)
{
	u64 lf = READ_ONCE(wb->last_flushed_id);
	u64 lw = READ_ONCE(wb->last_writeback_id);
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_WRITEBACK_THRESHOLD]);

	if (wb_dead(wb) || lw >= lf)
		return false;
	return wb_writeback_urgent(wb) || wb_forward_wanted(wb) ||
	       (thr && READ_ONCE(wb->writeback_allowed));
}

/*
 * dm-writeboost's writeback modulator, once a second: background writeback
 * is allowed while the backing device was busy (io_ticks) less than
 * writeback_threshold percent of the last interval. Its own writeback
 * counts too, so with a threshold below 100 it throttles itself, as
 * upstream does; 100 lets it run whenever the device is not saturated.
 */
void wb_update_writeback_allowed(struct wb_device *wb, unsigned long *ticks,
				 unsigned long *at)
{
	unsigned long now = jiffies;
	unsigned long t = part_stat_read(wb->backing_dev->bdev, io_ticks);
	unsigned int ms = jiffies_to_msecs(now - *at);
	unsigned int busy = jiffies_to_msecs(t - *ticks);
	unsigned int thr = READ_ONCE(wb->tunable[WB_T_WRITEBACK_THRESHOLD]);
	bool allowed = thr && (!ms || (u64)busy * 100 < (u64)thr * ms);

	*ticks = t;
	*at = now;
	WRITE_ONCE(wb->writeback_allowed, allowed);
	if (allowed)
		wake_up(&wb->writeback_wait);
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
 * How close (in sectors, either side) a block of the window must lie to a
 * block of the batch to be written ahead: 1 MiB, about a track of a
 * hard disk, so the head that goes there for the batch's block finds it on
 * the way (one revolution at most) instead of a seek and half a revolution
 * of its own later.
 */
#define WB_AHEAD_SECTORS	BIT(11)

/*
 * Blocks written ahead with a batch of nr blocks: at most four times as
 * many. The slots the batch frees wait for the whole turn, ahead blocks
 * included; over a region a few times the cache nearly every block of the
 * window lies within WB_AHEAD_SECTORS of one of the batch, and without a
 * bound a one-segment batch took the window's 31 segments with it (about
 * 4,000 blocks, a two-second turn). With pacing (wb_pace_open) the longest
 * write was the same at nr and 4 * nr (166 and 169 ms on the modelled hard
 * disk, bench/vm-peers.sh), while scenario 78's share of dirty blocks
 * behind the batch fell from 84 % to 73 % (upstream: 95 %).
 */
#define WB_AHEAD_BUDGET(nr)	(4 * (nr))

/* Whether a batch entry (sorted by sector, nr of them) lies near sector. */
static bool wb_near_batch(const struct wb_writeback_entry *e, unsigned int nr,
			  sector_t sector)
{
	unsigned int lo = 0, hi = nr;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (e[mid].sector < sector)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < nr && e[lo].sector - sector <= WB_AHEAD_SECTORS) ||
	       (lo > 0 && sector - e[lo - 1].sector <= WB_AHEAD_SECTORS);
}

/*
 * Writing ahead. While writers wait for slots the batch is one segment
 * (wb_batch_size), whose blocks lie all over the backing device: the disk
 * pays a seek and a rotation for each. The segments behind it, up to
 * nr_max_batched_writeback in all, hold blocks on the same tracks; those
 * within WB_AHEAD_SECTORS of a batch block go with the batch, sorted into
 * it, and are marked clean after the same backing flush. Their segments are
 * released later, in log order, and cost less then: the slots still come
 * free one at a time, but each batch leaves the ones behind it emptier.
 *
 * Only durable segments (last_durable_id) are written ahead: after a power
 * cut replay finds each of them whole, and replays it over the backing
 * device (a newer copy of the same block from a later segment wins again).
 * Every dirty copy of a chosen block in the window goes into the list, so
 * that only the newest is written (wb_entry_cmp) and none is written back
 * later over it; the window is scanned in log order and the scan ends at
 * WB_AHEAD_BUDGET, so a newer copy is never chosen without the older ones.
 * The window holds at most WB_MAX_BATCH - n segments of
 * WB_BLOCKS_PER_SEGMENT blocks, so the entries fit wb->writeback_entries
 * beside the batch's. Appends to wb->writeback_entries after the batch's
 * nr (sorted) entries and returns how many it added. Called without
 * wb->lock.
 */
static unsigned int wb_collect_ahead(struct wb_device *wb, u64 lw,
				     unsigned int n, unsigned int nr)
{
	struct wb_writeback_entry *entries = wb->writeback_entries;
	unsigned int window = min_t(unsigned int, WB_MAX_BATCH,
		READ_ONCE(wb->tunable[WB_T_NR_MAX_BATCHED_WRITEBACK]));
	unsigned int budget = WB_AHEAD_BUDGET(nr);
	unsigned int nr_ahead = 0, b, j;
	u64 last;

	if (!nr || n >= window)
		return 0;
	last = min_t(u64, lw + window, READ_ONCE(wb->last_durable_id));
	for (b = n; lw + 1 + b <= last && nr_ahead < budget; b++) {
		struct wb_segment *seg = wb_seg_of_id(wb, lw + 1 + b);

		spin_lock(&wb->lock);
		if (seg->id != lw + 1 + b) {
			spin_unlock(&wb->lock);
			break;
		}
		for (j = 0; j < seg->length && nr_ahead < budget; j++) {
			struct wb_metablock *mb = &seg->mb[j];

			if (!mb->dirty || mb->obsolete ||
			    !wb_near_batch(entries, nr, mb->sector))
				continue;
			entries[nr + nr_ahead] = (struct wb_writeback_entry) {
				.sector = mb->sector,
				.batch_idx = b,
				.idx = j,
				.data_bits = mb->data_bits,
			};
			nr_ahead++;
		}
		spin_unlock(&wb->lock);
	}
	return nr_ahead;
}

/* The metablock of a batch entry; lw is the batch's last_writeback_id. */
static struct wb_metablock *wb_entry_mb(struct wb_device *wb, u64 lw,
					const struct wb_writeback_entry *e)
{
	return &wb_seg_of_id(wb, lw + 1 + e->batch_idx)->mb[e->idx];
}

/* Submits the dirty sectors of one block as runs of contiguous sectors. */
static void wb_submit_runs(struct wb_device *wb, struct wb_aio *aio,
			   blk_opf_t opf, struct wb_writeback_entry *e,
			   void *data)
{
	unsigned int i, j;

	for (i = 0; wb_next_run(e->data_bits, &i, &j); i = j)
		wb_aio_submit(wb, aio, WB_DEV_BACKING, opf,
			      e->sector + i, data + (i << WB_SECTOR_SHIFT),
			      (j - i) << WB_SECTOR_SHIFT);
}

/*
 * Whether the batch writes entry i of the nr sorted ones: a newer copy of
 * the block in the batch holds a superset of its dirty sectors (writes
 * merge older dirty sectors; replay wrote the others to the backing
 * device), and the whole batch is marked clean at once: only the newest
 * is written.
 */
static bool wb_entry_written(struct wb_device *wb, unsigned int i,
			     unsigned int nr)
{
	return i + 1 == nr || wb->writeback_entries[i + 1].sector !=
			      wb->writeback_entries[i].sector;
}

/*
 * Fills one chunk of wb->stream with the data of the next entries the
 * batch writes, from entry *i on: a block whose segment kept its RAM
 * buffer is copied from it (4 KiB under the lock, as a merge), the others
 * are read from the cache device. The segments cannot change: they are
 * durable and not written back. Returns how many blocks it holds (0 at
 * the end of the batch) and moves *i past them; on a read error the
 * device is dead or, for a transient one, *i is left as it was.
 */
static unsigned int wb_stream_fill(struct wb_device *wb, u64 lw,
				   unsigned int *i, unsigned int nr,
				   void *chunk, int *err)
{
	DECLARE_BITMAP(from_dev, WB_STREAM_CHUNK_BLOCKS);
	struct blk_plug plug;
	struct wb_aio aio;
	unsigned int k, e, b;

	do {
		bitmap_zero(from_dev, WB_STREAM_CHUNK_BLOCKS);
		wb_aio_init(&aio);
		blk_start_plug(&plug);
		for (k = 0, e = *i; e < nr && k < WB_STREAM_CHUNK_BLOCKS; e++) {
			struct wb_writeback_entry *we = &wb->writeback_entries[e];
			struct wb_segment *seg =
				wb_seg_of_id(wb, lw + 1 + we->batch_idx);
			void *dst = chunk + k * WB_BLOCK_SIZE;

			if (!wb_entry_written(wb, e, nr))
				continue;
			spin_lock(&wb->lock);
			if (seg->buf) {
				memcpy(dst, seg->buf + WB_BLOCK_SIZE * (1 + we->idx),
				       WB_BLOCK_SIZE);
				spin_unlock(&wb->lock);
			} else {
				spin_unlock(&wb->lock);
				__set_bit(k, from_dev);
				wb_aio_submit(wb, &aio, WB_DEV_CACHE, REQ_OP_READ,
					      wb_mb_cache_sector(wb, &seg->mb[we->idx]),
					      dst, WB_BLOCK_SIZE);
			}
			k++;
		}
		blk_finish_plug(&plug);
		*err = wb_aio_wait(&aio);
	} while (wb_retry_transient(wb, *err));
	if (*err) {
		wb_set_dead(wb, WB_DEV_CACHE, WB_OP_READ, aio.err_sector, *err);
		return 0;
	}
	for_each_set_bit(b, from_dev, k)
		invalidate_kernel_vmap_range(chunk + b * WB_BLOCK_SIZE,
					     WB_BLOCK_SIZE);
	*i = e;
	return k;
}

/*
 * Writes the batch's nr sorted entries to the backing device, the newest
 * copy of each block (wb_entry_written), through wb->stream: the batch's
 * memory is the stream's 2 MiB whatever its size (its segments read whole
 * would take 512 KiB each, 16 MiB for a batch of 32). Chunk after chunk
 * is filled (wb_stream_fill) and its writes submitted plugged, so that
 * adjacent blocks merge into larger requests (the point of sorting); a chunk is
 * refilled once its writes ended, so WB_STREAM_CHUNKS - 1 chunks of
 * writes are in flight while the next one is read, and the backing device
 * sees the batch's writes in sector order without a gap. Returns 0 or the
 * first error: a cache device read error has killed the target, a backing
 * write error is the caller's.
 */
static int wb_stream_writeback(struct wb_device *wb, u64 lw, unsigned int nr,
			       blk_opf_t write_opf, sector_t *err_sector)
{
	struct wb_aio writes[WB_STREAM_CHUNKS];
	bool busy[WB_STREAM_CHUNKS] = { };
	unsigned int i = 0, c, k, e, filled;
	struct blk_plug plug;
	int err = 0, werr;

	for (c = 0; i < nr; c = (c + 1) % WB_STREAM_CHUNKS) {
		void *chunk = wb->stream + c * WB_STREAM_CHUNK_BLOCKS * WB_BLOCK_SIZE;
		unsigned int first = i;

		if (busy[c]) {
			busy[c] = false;
			err = wb_aio_wait(&writes[c]);
			if (err) {
				*err_sector = writes[c].err_sector;
				break;
			}
		}
		filled = wb_stream_fill(wb, lw, &i, nr, chunk, &err);
		if (err)
			break;
		wb_aio_init(&writes[c]);
		busy[c] = true;
		blk_start_plug(&plug);
		for (k = 0, e = first; k < filled; e++) {
			if (!wb_entry_written(wb, e, nr))
				continue;
			wb_submit_runs(wb, &writes[c], write_opf,
				       &wb->writeback_entries[e],
				       chunk + k * WB_BLOCK_SIZE);
			k++;
		}
		blk_finish_plug(&plug);
	}
	/* The stream is reused by the next batch: every write must end. */
	for (c = 0; c < WB_STREAM_CHUNKS; c++) {
		if (!busy[c])
			continue;
		werr = wb_aio_wait(&writes[c]);
		if (werr && !err) {
			err = werr;
			*err_sector = writes[c].err_sector;
		}
	}
	return err;
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
	u64 lw, start_ns = ktime_get_ns();
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
			wb->writeback_entries[nr++] = (struct wb_writeback_entry) {
				.sector = mb->sector,
				.batch_idx = b,
				.idx = j,
				.data_bits = mb->data_bits,
			};
		}
	}
	spin_unlock(&wb->lock);
	if (wb_make_durable(wb, lw + n))
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

/* ---------------------------------------------------------------------- */
/* Moving small segments forward in the log */

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
	return mb->dirty && !mb->obsolete && !hlist_unhashed(&mb->ht_node);
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
 * opened if none is and a slot is free, or sealed and another opened if it
 * is full), from data (seg's data blocks), and makes the copies the newest
 * ones. False, with nothing moved, when they do not fit or no slot is free
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
		if (cur->length < WB_BLOCKS_PER_SEGMENT)
			return false;
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
		nmb->sector = mb->sector;
		nmb->data_bits = mb->data_bits;
		nmb->dirty = true;
		nmb->obsolete = false;
		wb_ht_add(wb, nmb);
		md = cur->buf + WB_METABLOCK_OFFSET(idx);
		md->sector = cpu_to_le64(nmb->sector);
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
static bool wb_forward_heads(struct wb_device *wb)
{
	struct wb_segment *segs[WB_MAX_BATCH];
	void *data[WB_MAX_BATCH];	/* each segment's data blocks */
	u8 lens[WB_MAX_BATCH];
	bool has_dirty[WB_MAX_BATCH];
	unsigned int n, k, j, room, nr_blocks = 0, nr_read = 0;
	u64 lw, target = 0;

	if (!wb_forward_wanted(wb))
		return false;
	spin_lock(&wb->lock);
	lw = wb->last_writeback_id;
	room = WB_BLOCKS_PER_SEGMENT - (wb->cur ? wb->cur->length : 0);
	for (n = 0; n < WB_MAX_BATCH && lw + 1 + n <= wb->last_flushed_id; n++) {
		struct wb_segment *seg = wb_seg_of_id(wb, lw + 1 + n);
		u8 len = seg->id == lw + 1 + n ? seg->length : 0;
		unsigned int need = wb_forward_count(seg, len);

		/*
		 * Whole segments are read, into wb->stream; one with nothing
		 * to copy is not read at all.
		 */
		if (need > WB_FORWARD_MAX_BLOCKS || nr_blocks + need > room ||
		    (need && nr_read + len > WB_STREAM_BLOCKS))
			break;
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
	if (!nr_blocks || (n < 2 && (!wb->cur || !wb->cur->length))) {
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

	wait_event_hrtimeout(wb->wait, READ_ONCE(wb->last_durable_id) >= target ||
			     wb_dead(wb), ns_to_ktime(WB_FORWARD_WAIT_NS));
	if (READ_ONCE(wb->last_durable_id) < target) {
		wb_commit(wb);
		wb_wait_io(wb->wait, READ_ONCE(wb->last_durable_id) >= target ||
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

/* Called with wb->batch_lock held. */
static void wb_writeback_batch_locked(struct wb_device *wb)
{
	__wb_writeback_batch(wb);
	/* Written, failed or to be written again: no longer due. */
	spin_lock(&wb->lock);
	wb->batch_due_ns = 0;
	spin_unlock(&wb->lock);
}

/* The daemon's own reason to give up waiting: it is being stopped. */
static bool wb_writeback_stopping(struct wb_device *wb)
{
	return kthread_should_stop() ||
	       test_bit(WB_F_STOPPING_WRITEBACK, &wb->flags);
}

/*
 * batch_lock is held for a whole batch, seconds on a slow backing device,
 * so it is taken in a slice-woken wait (see wb_wait_io) and its release
 * wakes wb->wait. The daemon's wait also ends when it is being stopped:
 * false, not locked.
 */
static bool wb_lock_batch(struct wb_device *wb, bool daemon)
{
	bool locked = false;

	wb_wait_io(wb->wait, (daemon && wb_writeback_stopping(wb)) ||
		   (locked = mutex_trylock(&wb->batch_lock)));
	return locked;
}

static void wb_unlock_batch(struct wb_device *wb)
{
	mutex_unlock(&wb->batch_lock);
	wake_up_all(&wb->wait);
}

/*
 * One batch at a time: the daemon, and drop_caches on a suspended device
 * (which writes back in its caller while the daemon is stopped, and may
 * overlap a resume that starts it again).
 */
void wb_writeback_batch(struct wb_device *wb)
{
	wb_lock_batch(wb, false);
	wb_writeback_batch_locked(wb);
	wb_unlock_batch(wb);
}

int wb_writeback_daemon(void *data)
{
	struct wb_device *wb = data;

	while (!kthread_should_stop()) {
		wait_event_interruptible_timeout(wb->writeback_wait,
						 (wb_should_writeback(wb) &&
						  !wb_writeback_stopping(wb)) ||
						 kthread_should_stop(), HZ);
		if (wb_writeback_stopping(wb) || !wb_should_writeback(wb) ||
		    !wb_lock_batch(wb, true))
			continue;
		if (!wb_forward_heads(wb))
			wb_writeback_batch_locked(wb);
		wb_unlock_batch(wb);
	}
	return 0;
}

/*
 * kthread_stop's wait does not wake for the hung-task detector, and
 * dmsetup remove would sit in it for the whole batch in progress (6 s on
 * a backing device taking 3 s per write, then as long for its flush). So
 * the daemon is told to start no other batch, the one in progress ends in
 * wb_lock_batch's slice-woken wait, and only then is the thread stopped.
 * The thread must not return before kthread_stop: it waits for it.
 */
void wb_stop_writeback_daemon(struct wb_device *wb)
{
	set_bit(WB_F_STOPPING_WRITEBACK, &wb->flags);
	wb_lock_batch(wb, false);
	kthread_stop(wb->writeback_task);
	wb_unlock_batch(wb);
	clear_bit(WB_F_STOPPING_WRITEBACK, &wb->flags);
	wb->writeback_task = NULL;
}

/* ---------------------------------------------------------------------- */
/* Superblock record and data sync */

/*
 * last_writeback_id only moves after the backing device was flushed, so the
 * record never runs ahead of it.
 */
static void wb_update_sb_record(struct wb_device *wb, void *blk)
{
	wb_write_sb_record(wb, blk, READ_ONCE(wb->last_writeback_id));
}

int wb_periodic_daemon(void *data)
{
	struct wb_device *wb = data;
	unsigned long last_sync = jiffies, last_record = jiffies;
	unsigned long ticks = part_stat_read(wb->backing_dev->bdev, io_ticks);
	unsigned long ticks_at = jiffies;
	void *blk = (void *)__get_free_page(GFP_KERNEL);

	while (!kthread_should_stop()) {
		unsigned int sync, rec;

		schedule_timeout_interruptible(HZ);
		/* postsuspend stops this thread; this covers the moment before. */
		if (wb_dead(wb) || test_bit(WB_F_SUSPENDED, &wb->flags))
			continue;
		/* Held by wb_stop_periodic_daemon: no round until kthread_stop. */
		if (!mutex_trylock(&wb->periodic_lock))
			continue;

		wb_update_writeback_allowed(wb, &ticks, &ticks_at);

		sync = READ_ONCE(wb->tunable[WB_T_SYNC_DATA_INTERVAL]);
		if (!sync) {
			last_sync = jiffies;
		} else if (time_after_eq(jiffies, last_sync + sync * HZ)) {
			last_sync = jiffies;
			/* Written and made durable by the flusher. */
			wb_commit(wb);
		}

		rec = READ_ONCE(wb->tunable[WB_T_UPDATE_SB_RECORD_INTERVAL]);
		if (!rec) {
			last_record = jiffies;
		} else if (blk && time_after_eq(jiffies, last_record + rec * HZ)) {
			last_record = jiffies;
			wb_update_sb_record(wb, blk);
		}
		mutex_unlock(&wb->periodic_lock);
		wake_up_all(&wb->wait);
	}
	free_page((unsigned long)blk);
	return 0;
}

/*
 * As wb_stop_writeback_daemon, for the same reason: a round writes the
 * superblock record, as long as a slow cache device takes, and
 * kthread_stop would sleep through it in one piece. The round in progress
 * ends in a slice-woken wait, and only then is the thread stopped (it is
 * between rounds, and starts none while the lock is held here).
 */
void wb_stop_periodic_daemon(struct wb_device *wb)
{
	wb_wait_io(wb->wait, mutex_trylock(&wb->periodic_lock));
	kthread_stop(wb->periodic_task);
	mutex_unlock(&wb->periodic_lock);
	wb->periodic_task = NULL;
}
