/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The replay rules of format/wbkit_format.h compiled as C, the way the kernel
 * module compiles them, so test_replay_rules can check that C and C++ agree.
 */
#include "wbkit_format.h"

__u64 wb_c_slot_of_id(__u64 id, __u64 nr_segments)
{
	return wb_slot_of_id(id, nr_segments);
}

__u64 wb_c_oldest_slot(__u64 max_id, __u64 nr_segments)
{
	return wb_oldest_slot(max_id, nr_segments);
}

__u64 wb_c_ring_slot(__u64 oldest_slot, __u64 step, __u64 nr_segments)
{
	return wb_ring_slot(oldest_slot, step, nr_segments);
}

__u64 wb_c_last_writeback_id(__u64 last_flushed_id, __u64 sb_record,
			     __u64 nr_segments)
{
	return wb_last_writeback_id(last_flushed_id, sb_record, nr_segments);
}

bool wb_c_sb_record_in_range(__u64 sb_record, __u64 max_id, __u64 nr_segments)
{
	return wb_sb_record_in_range(sb_record, max_id, nr_segments);
}

__u8 wb_c_entry_sectors(__u8 dirty_bits)
{
	return wb_entry_sectors(dirty_bits);
}

bool wb_c_entry_is_newer(__u64 pos_a, __u32 index_a, __u64 pos_b, __u32 index_b)
{
	return wb_entry_is_newer(pos_a, index_a, pos_b, index_b);
}

bool wb_c_torn_rewrite(__u64 step, __u64 slot_id, __u64 max_id,
		       __u64 nr_segments)
{
	return wb_torn_rewrite(step, slot_id, max_id, nr_segments);
}
