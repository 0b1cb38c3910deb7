// SPDX-License-Identifier: GPL-2.0
/*
 * dm-wbkit-message.c - the tunables (the table line's optional arguments
 * and the messages that change them), the other messages (drop_caches,
 * clear_stat, dead_cause, error_counts, forward_counts) and the status.
 */
#include <linux/sched/signal.h>
#include <linux/string.h>

#include "dm-wbkit.h"

#define DM_MSG_PREFIX "writeboost"

/* ---------------------------------------------------------------------- */
/* Tunables */

#define WB_T_DEF(e, key, min, max, def, fixed, error)			\
	[WB_T_##e] = { #key, { min, max, error }, def, fixed },
const struct wb_tunable_def wb_tunables[WB_T_NR] = {
	WB_TUNABLE_ROWS(WB_T_DEF)
};

#undef WB_T_DEF
static_assert(WB_MAX_BATCH == 32, "nr_max_batched_writeback's row: its maximum is WB_MAX_BATCH");

/* Fixed at construction, as in dm-writeboost: messages cannot change them. */
static bool wb_tunable_static(int t)
{
	return wb_tunables[t].fixed;
}

static int wb_tunable_index(const char *key)
{
	int t;

	for (t = 0; t < WB_T_NR; t++)
		if (!strcasecmp(key, wb_tunables[t].name))
			return t;
	return -1;
}

/*
 * Parses "<#optargs> <key> <value> ..." as dm-writeboost 2.2.17 does: keys
 * in any order and any case, a key given twice takes the last value, and
 * words after the counted ones are ignored (logged). The same lines load.
 */
int wb_parse_optargs(struct wb_device *wb, struct dm_arg_set *as,
		     char **error)
{
	static const struct dm_arg nr_args = {
		0, 2 * WB_T_NR, "Invalid number of optional arguments"
	};
	unsigned int argc, val, i;
	const char *key;
	int t, r;

	if (!as->argc)
		return 0;
	r = dm_read_arg(&nr_args, as, &argc, error);
	if (r)
		return r;
	wb->ctr_count_given = true;
	if (argc % 2 || argc > as->argc) {
		*error = "Optional arguments must be <key> <value> pairs";
		return -EINVAL;
	}
	while (argc) {
		key = dm_shift_arg(as);
		argc -= 2;
		t = wb_tunable_index(key);
		if (t < 0) {
			*error = "Unknown optional argument";
			return -EINVAL;
		}
		r = dm_read_arg(&wb_tunables[t].arg, as, &val, error);
		if (r)
			return r;
		wb->tunable[t] = val;
		for (i = 0; i < wb->nr_ctr_keys && wb->ctr_keys[i] != t; i++)
			;
		if (i == wb->nr_ctr_keys)
			wb->ctr_keys[wb->nr_ctr_keys++] = t;
	}
	if (as->argc)
		DMWARN("%u words after the optional arguments ignored, as dm-writeboost does",
		       as->argc);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Messages and status */

/*
 * Why drop_caches gave up, with what is left, in the kernel log: the
 * message itself can only return an errno.
 */
static int wb_drop_caches_stopped(struct wb_device *wb, int r, const char *why)
{
	DMINFO("drop_caches stopped (%s): %llu dirty blocks left, segments %llu to %llu not written back",
	       why, (unsigned long long)READ_ONCE(wb->nr_dirty),
	       (unsigned long long)READ_ONCE(wb->last_writeback_id) + 1,
	       (unsigned long long)READ_ONCE(wb->last_flushed_id));
	return r;
}

/*
 * dmsetup remove marks the disk dead first, then, on a device already
 * suspended, calls no target hook before it waits for every hold on the
 * mapped device to end, the message's included (__dm_destroy).
 */
static bool wb_removing(struct wb_device *wb)
{
	return test_bit(GD_DEAD, &dm_disk(wb->md)->state);
}

/*
 * Writes back everything and waits for it. A signal (-EINTR), a suspend
 * that starts meanwhile (-EBUSY) or a remove (-ENODEV) stops the wait:
 * writeback goes on in the background on a live device, and the message
 * can be sent again.
 */
static int wb_drop_caches(struct wb_device *wb)
{
	u64 id;
	int r;

	/*
	 * A reloaded table is live before its first resume has replayed the
	 * log: until then its ids say nothing (last_flushed_id may be set,
	 * last_writeback_id not yet), and writeback would start from them.
	 */
	if (!test_bit(WB_F_STARTED, &wb->flags))
		return -EBUSY;
	/* Pairs with writeboost_preresume's: the ids before the bit. */
	smp_mb__after_atomic();

	/*
	 * Suspended, the threads are stopped and postsuspend put the RAM
	 * buffer on the cache device: write back here, on request. Debian's
	 * writeboost script stops a cache that way (suspend, drop_caches,
	 * remove, then it zeroes the superblock), as dm-writeboost allows.
	 * One batch at a time, so that a signal stops it between two.
	 */
	if (test_bit(WB_F_SUSPENDED, &wb->flags)) {
		r = 0;
		atomic_inc(&wb->drop_caches);
		/*
		 * Only while still suspended: once resumed, the daemon writes
		 * back and this caller waits for it below (a resume that
		 * interrupts this loop must not leave two writers).
		 */
		while (!wb_dead(wb) && test_bit(WB_F_SUSPENDED, &wb->flags) &&
		       READ_ONCE(wb->last_writeback_id) <
		       READ_ONCE(wb->last_flushed_id)) {
			if (signal_pending(current)) {
				r = -EINTR;
				break;
			}
			if (wb_removing(wb)) {
				r = -ENODEV;
				break;
			}
			wb_writeback_batch(wb);
		}
		atomic_dec(&wb->drop_caches);
		if (r)
			return wb_drop_caches_stopped(wb, r, r == -EINTR ? "signal" :
						      "the device is being removed");
		if (wb_dead(wb) || test_bit(WB_F_SUSPENDED, &wb->flags) ||
		    READ_ONCE(wb->last_writeback_id) >=
		    READ_ONCE(wb->last_flushed_id))
			return wb_dead(wb) ? -EIO : 0;
	}
	atomic_inc(&wb->drop_caches);
	id = wb_seal_for_flush(wb);
	wake_up(&wb->writeback_wait);
	r = wait_event_interruptible(wb->wait,
				     READ_ONCE(wb->last_writeback_id) >= id ||
				     wb_dead(wb) ||
				     test_bit(WB_F_SUSPENDING, &wb->flags) ||
				     test_bit(WB_F_SUSPENDED, &wb->flags) ||
				     wb_removing(wb));
	atomic_dec(&wb->drop_caches);
	if (wb_dead(wb))
		return -EIO;
	if (READ_ONCE(wb->last_writeback_id) >= id)
		return 0;
	if (r)
		return wb_drop_caches_stopped(wb, -EINTR, "signal");
	if (wb_removing(wb))
		return wb_drop_caches_stopped(wb, -ENODEV, "the device is being removed");
	return wb_drop_caches_stopped(wb, -EBUSY, "the device is suspending");
}

/* The reply to error_counts: <name> <count> pairs, enum wb_err_counter's order. */
#define WB_ERR_NAME(e, name, effect)					\
	[WB_ERR_##e] = #name,
static const char *const wb_err_counter_names[WB_ERR_NR] = {
	WB_ERROR_COUNTER_ROWS(WB_ERR_NAME)
};

#undef WB_ERR_NAME

static void wb_emit_error_counts(struct wb_device *wb, char *result,
				 unsigned int maxlen)
{
	unsigned int sz = 0, i;

	for (i = 0; i < WB_ERR_NR; i++)
		DMEMIT("%s%s %lld", i ? " " : "", wb_err_counter_names[i],
		       (long long)atomic64_read(&wb->nr_errors[i]));
}

/*
 * The reply to dead_cause: "alive", or <cache|backing> <read|write|flush>
 * <sector> <errno>, e.g. "cache write 5120 -5".
 */
static void wb_emit_dead_cause(struct wb_device *wb, char *result,
			       unsigned int maxlen)
{
	unsigned int sz = 0;

	if (!wb_dead(wb)) {
		DMEMIT("alive");
		return;
	}
	smp_rmb();	/* pairs with wb_set_dead: cause before flag */
	DMEMIT("%s %s %llu %d",
	       wb->cause.dev == WB_DEV_CACHE ? "cache" : "backing",
	       wb_op_name(wb->cause.op), (unsigned long long)wb->cause.sector,
	       wb->cause.err);
}

/*
 * dmsetup message <dev> 0 <key> <value>     (the tunables of the table line)
 * dmsetup message <dev> 0 drop_caches       (write back everything, wait)
 * dmsetup message <dev> 0 clear_stat
 * dmsetup message <dev> 0 dead_cause        (replies why the target died)
 * dmsetup message <dev> 0 error_counts      (replies the error counters)
 * dmsetup message <dev> 0 forward_counts    (replies segments and blocks
 *                                            moved forward, wb_forward_heads)
 */
int writeboost_message(struct dm_target *ti, unsigned int argc, char **argv,
		       char *result, unsigned int maxlen)
{
	struct wb_device *wb = ti->private;
	unsigned int val;
	int t;

	if (argc == 1 && !strcasecmp(argv[0], "dead_cause")) {
		wb_emit_dead_cause(wb, result, maxlen);
		return 1;	/* the reply is in result */
	}
	if (argc == 1 && !strcasecmp(argv[0], "error_counts")) {
		wb_emit_error_counts(wb, result, maxlen);
		return 1;
	}
	if (argc == 1 && !strcasecmp(argv[0], "forward_counts")) {
		unsigned int sz = 0;

		DMEMIT("segments %lld blocks %lld",
		       (long long)atomic64_read(&wb->nr_forwarded_segs),
		       (long long)atomic64_read(&wb->nr_forwarded_blocks));
		return 1;
	}

	if (argc == 1 && !strcasecmp(argv[0], "drop_caches"))
		return wb_drop_caches(wb);
	if (argc == 1 && !strcasecmp(argv[0], "clear_stat")) {
		for (t = 0; t < WB_STATLEN; t++)
			atomic64_set(&wb->stat[t], 0);
		atomic64_set(&wb->nr_partial_flushed, 0);
		return 0;
	}
	if (argc != 2) {
		DMWARN("unknown message: use <key> <value>, drop_caches, clear_stat, dead_cause, error_counts or forward_counts");
		return -EINVAL;
	}
	t = wb_tunable_index(argv[0]);
	if (t < 0) {
		DMWARN("unknown message key %s", argv[0]);
		return -EINVAL;
	}
	if (wb_tunable_static(t)) {
		DMWARN("%s is fixed at construction: reload the table to change it",
		       wb_tunables[t].name);
		return -EINVAL;
	}
	if (kstrtouint(argv[1], 10, &val) || val < wb_tunables[t].arg.min ||
	    val > wb_tunables[t].arg.max) {
		DMWARN("%s", wb_tunables[t].arg.error);
		return -EINVAL;
	}
	if (t == WB_T_READ_CACHE_THRESHOLD && val && wb_rc_alloc_data(wb)) {
		DMWARN("no memory for the read cache cells");
		return -ENOMEM;
	}
	WRITE_ONCE(wb->tunable[t], val);
	wake_up(&wb->writeback_wait);
	return 0;
}

/*
 * A number of the status line before its pairs (WB_STATUS_FIELD_ROWS in
 * format/wbkit_contract.h): a row without a case here is a -Wswitch
 * warning. stat counts bios by index write << 3 | hit << 2 | on_buffer << 1
 * | fullsize.
 */
enum wb_status_field {
#define WB_STATUS_FIELD_ENUM(e, name, count) WB_SF_##e,
	WB_STATUS_FIELD_ROWS(WB_STATUS_FIELD_ENUM)
#undef WB_STATUS_FIELD_ENUM
	WB_SF_NR
};

static u64 wb_status_number(struct wb_device *wb, enum wb_status_field field,
			    unsigned int i, u64 cur_id, u64 cursor)
{
	switch (field) {
	case WB_SF_CURSOR_POS:
		return cursor;
	case WB_SF_NR_CACHE_BLOCKS:
		return (u64)wb->nr_segments * WB_BLOCKS_PER_SEGMENT;
	case WB_SF_NR_SEGMENTS:
		return wb->nr_segments;
	case WB_SF_CURRENT_ID:
		return cur_id;
	case WB_SF_LAST_FLUSHED_ID:
		return READ_ONCE(wb->last_flushed_id);
	case WB_SF_LAST_WRITEBACK_ID:
		return READ_ONCE(wb->last_writeback_id);
	case WB_SF_NR_DIRTY_CACHE_BLOCKS:
		return READ_ONCE(wb->nr_dirty);
	case WB_SF_STAT:
		return atomic64_read(&wb->stat[i]);
	case WB_SF_NR_PARTIAL_FLUSHED:
		return atomic64_read(&wb->nr_partial_flushed);
	case WB_SF_NR:
		break;
	}
	return 0;
}

static const unsigned int wb_status_field_counts[] = {
#define WB_STATUS_FIELD_COUNT(e, name, count) (count),
	WB_STATUS_FIELD_ROWS(WB_STATUS_FIELD_COUNT)
#undef WB_STATUS_FIELD_COUNT
};

/*
 * The pairs: each key, and for a TUNABLE pair the table option whose value
 * it shows (-1 for a STATE pair, whose value wb_status_state() gives).
 */
#define WB_STATUS_OPTION_TUNABLE(e) WB_T_##e
#define WB_STATUS_OPTION_STATE(e) -1
static const struct {
	const char *key;
	int option;
} wb_status_pairs[] = {
#define WB_STATUS_PAIR_DEF(e, key, kind, upstream) { #key, WB_STATUS_OPTION_##kind(e) },
	WB_STATUS_PAIR_ROWS(WB_STATUS_PAIR_DEF)
#undef WB_STATUS_PAIR_DEF
};

static_assert(ARRAY_SIZE(wb_status_field_counts) == WB_SF_NR);
/* wb_status_number() reads stat[i] for every i of the stat row. */
static_assert(WB_STATUS_SIZE_STAT == WB_STATLEN);
static_assert(ARRAY_SIZE(wb_status_pairs) == WB_STATUS_NR_PAIRS);

/* u64: a counter since the target was made may pass 2^32. */
static u64 wb_status_state(struct wb_device *wb,
			   enum wb_status_pair_place pair)
{
	switch (pair) {
	case WB_STATUS_PAIR_NR_CUR_BATCHED_WRITEBACK:
		return READ_ONCE(wb->nr_cur_batched);
	case WB_STATUS_PAIR_DEAD:
		return wb_dead(wb) ? 1 : 0;
	case WB_STATUS_PAIR_NR_DISCARDED_BLOCKS:
		return atomic64_read(&wb->nr_discarded_blocks);
	case WB_STATUS_PAIR_NR_DISCARDED_DIRTY:
		return atomic64_read(&wb->nr_discarded_dirty);
	default:
		/* A TUNABLE pair: wb_status_pairs names its option. */
		WARN_ON_ONCE(1);
		return 0;
	}
}

/*
 * Status (STATUSTYPE_INFO), dm-writeboost's layout, from the rows of
 * format/wbkit_contract.h:
 *
 *   <cursor_pos> <nr_cache_blocks> <nr_segments> <current_id>
 *   <last_flushed_id> <last_writeback_id> <nr_dirty_cache_blocks>
 *   <stat * 16> <nr_partial_flushed>
 *   16 writeback_threshold <n> nr_cur_batched_writeback <n>
 *      sync_data_interval <n> update_sb_record_interval <n>
 *      read_cache_threshold <n> dead <0|1>
 *      nr_discarded_blocks <n> nr_discarded_dirty <n>
 *
 * The dead state and the discard counters are more counted key/value pairs
 * after upstream's (it has 10 tokens there), so a parser that trusts the
 * count reads every token, and every value is an integer, as upstream's
 * are. The cause of the dead state is in the kernel log and in the reply
 * to the message dead_cause.
 */
void writeboost_status(struct dm_target *ti, status_type_t type,
		       unsigned int status_flags, char *result,
		       unsigned int maxlen)
{
	struct wb_device *wb = ti->private;
	struct wb_segment *cur = READ_ONCE(wb->cur);
	unsigned int sz = 0, i;
	enum wb_status_pair_place p;
	enum wb_status_field f;
	u64 cursor, cur_id;

	switch (type) {
	case STATUSTYPE_INFO:
		cur_id = cur ? cur->id : READ_ONCE(wb->last_sealed_id) + 1;
		cursor = (u64)wb_id_to_slot(wb, cur_id) * WB_BLOCKS_PER_SEGMENT +
			 (cur ? cur->length : 0);
		for (f = 0; f < ARRAY_SIZE(wb_status_field_counts); f++)
			for (i = 0; i < wb_status_field_counts[f]; i++)
				DMEMIT("%s%llu", sz ? " " : "",
				       (unsigned long long)wb_status_number(wb,
						f, i, cur_id, cursor));
		DMEMIT(" %u", 2 * WB_STATUS_NR_PAIRS);
		for (p = 0; p < WB_STATUS_NR_PAIRS; p++) {
			int option = wb_status_pairs[p].option;
			u64 val = option >= 0 ? READ_ONCE(wb->tunable[option]) :
				  wb_status_state(wb, p);

			DMEMIT(" %s %llu", wb_status_pairs[p].key,
			       (unsigned long long)val);
		}
		break;

	case STATUSTYPE_TABLE:
		DMEMIT("%s %s", wb->backing_dev->name, wb->cache_dev->name);
		if (!wb->ctr_count_given)
			break;
		DMEMIT(" %u", 2 * wb->nr_ctr_keys);
		for (i = 0; i < wb->nr_ctr_keys; i++)
			DMEMIT(" %s %u", wb_tunables[wb->ctr_keys[i]].name,
			       READ_ONCE(wb->tunable[wb->ctr_keys[i]]));
		break;

	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
}
