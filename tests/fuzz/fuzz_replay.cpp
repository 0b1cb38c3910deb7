// libFuzzer target for the shared replay decision of format/wbkit_format.h
// (wb_replay_walk_begin, wb_replay_walk_slot, wb_replay_decide), held against
// a model written from docs/FORMAT.md's replay rules alone. The input
// describes a ring of 1..20 slots (an id and a verdict each: empty, valid,
// bad, unreadable), the superblock record, the trust record (absent, present
// with a value, present with WB_TRUST_NONE) and an override of the
// torn-rewrite rule. Ids are mostly those of an intact ring around a newest
// id, with some out of place, one lap off, repeated or anywhere up to
// 2^64 - 1, so that every rule meets its edge cases. An unreadable slot has
// id 0 (its header could not be read), as docs/FORMAT.md's inputs say.
//
// The decision runs three ways, which must give the same plan:
//   - as the tools call it: every step with the slot's id and verdict;
//   - as the kernel calls it: past the stop it reads no segment, so it
//     passes a non-empty slot as valid, and an unreadable header (id 0) as
//     an empty slot;
//   - with the verdicts of the readable slots past the stop swapped (valid
//     for bad and back), which the decision must not look at.
// Any difference from the model, in the refusal (kind, slot, id), the
// walk's actions in order (apply, restart, stop, lost), last_flushed_id,
// last_writeback_id, next_id, the trust, the stop slot to zero, the
// record to rewrite or the discarded slots to zero (in order), aborts
// with the input decoded on stderr.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "fuzz_input.hpp"
#include "wbkit_format.h"

namespace {

constexpr unsigned max_slots = 20;

enum class Verdict : std::uint8_t {
	empty,
	valid,
	bad,
	unreadable,
};

const char* verdict_name(Verdict v)
{
	switch (v) {
	case Verdict::empty:
		return "empty";
	case Verdict::valid:
		return "valid";
	case Verdict::bad:
		return "bad";
	case Verdict::unreadable:
		return "unreadable";
	}
	return "?";
}

struct Slot {
	std::uint64_t id = 0; // 0: empty, or unreadable (its id is not known)
	Verdict verdict = Verdict::empty;
};

enum class TrustKind : std::uint8_t {
	absent,
	present,      // with trusted_from_id
	present_none, // with the value WB_TRUST_NONE
};

struct Case {
	unsigned nr = 1;
	std::array<Slot, max_slots> slots{};
	std::uint64_t record = 0;
	TrustKind trust = TrustKind::absent;
	std::uint64_t trusted_from_id = WB_TRUST_NONE; // WB_TRUST_NONE unless present
	std::optional<bool> torn_override{};           // a tool's option; unset: by the trust record
};

// What a step of the walk told the caller, or what the model says it must.
enum class Action : std::uint8_t {
	apply,
	restart,
	stop,
	lost,
};

struct Event {
	Action action = Action::apply;
	std::uint64_t slot = 0, id = 0;
	bool operator==(const Event&) const = default;
};

// The answer compared between the decision and the model.
struct Answer {
	int refusal = WB_REPLAY_OK;
	std::uint64_t refusal_slot = 0, refusal_id = 0; // compared when refused
	std::array<Event, max_slots> events{};
	unsigned nr_events = 0;
	std::uint64_t lf = 0, lw = 0, next_id = 0;
	std::uint64_t trusted_from_id = 0;
	bool write_trust = false;
	bool zero_stop_slot = false;
	std::uint64_t stop_slot = 0; // compared when zero_stop_slot
	bool rewrite_record = false;
	std::array<std::uint64_t, 2 * WB_REWRITE_WINDOW> drop{};
	unsigned nr_drop = 0;

	void add(Action action, std::uint64_t slot, std::uint64_t id) { events[nr_events++] = {action, slot, id}; }
};

// A value near `around`: a little below or above it, wrapping as u64 does.
std::uint64_t near(Input& in, std::uint64_t around)
{
	const std::uint8_t d = in.u8();
	return d & 0x80 ? around - (d & 0x1f) : around + (d & 0x1f);
}

Case decode(Input& in)
{
	Case c;
	c.nr = 1 + in.u8() % max_slots;
	const std::uint8_t mode = in.u8();
	c.trust = TrustKind(mode % 3);
	switch ((mode / 3) % 4) {
	case 0:
	case 1:
		break;
	case 2:
		c.torn_override = true;
		break;
	default:
		c.torn_override = false;
	}

	// The newest id of the ring the slots are drawn from.
	std::uint64_t newest;
	switch (in.u8() % 8) {
	case 0:
		newest = in.u8() % 24; // a first lap, or just past it
		break;
	case 1:
		newest = std::uint64_t(c.nr) * (1 + in.u8() % 4) + in.u8() % 3; // around a lap's end
		break;
	case 2:
		newest = ~std::uint64_t(0) - in.u8() % 48; // the top of the 64-bit range
		break;
	case 3:
		newest = in.u64();
		break;
	default:
		newest = 20 + in.u8();
	}

	// How often a slot's id is not the one an intact ring holds there: from
	// almost never (a clean ring, damaged by its verdicts only) to often.
	static constexpr std::array<unsigned, 4> perturb_one_in{1000, 150, 50, 15};
	const unsigned perturb = perturb_one_in[in.u8() % 4];

	for (unsigned k = 0; k < c.nr; ++k) {
		Slot& s = c.slots[k];
		const std::uint8_t v = in.u8() % 32;
		s.verdict = v < 3 ? Verdict::empty : v < 25 ? Verdict::valid
					     : v < 31       ? Verdict::bad
							    : Verdict::unreadable;
		// The id an intact ring whose newest is `newest` holds in slot k:
		// the one of newest - nr + 1 .. newest whose slot is k, 0 when the
		// ring has not reached it yet.
		std::uint64_t id = 0;
		if (newest > 0) {
			const std::uint64_t newest_slot = (newest - 1) % c.nr;
			const std::uint64_t behind = (newest_slot + c.nr - k) % c.nr;
			id = newest > behind ? newest - behind : 0;
		}
		const std::uint16_t p = std::uint16_t(in.u8() | in.u8() << 8) % perturb;
		switch (p) {
		case 0:
			id -= c.nr; // a lap behind: a stale slot
			break;
		case 1:
			id += c.nr; // a lap ahead
			break;
		case 2:
			id = near(in, id); // out of its slot, mostly
			break;
		case 3:
			id = in.u64();
			break;
		case 4:
			id = newest; // a second copy of the newest id
			break;
		case 5:
			id = near(in, newest);
			break;
		case 6:
			id -= 2 * std::uint64_t(c.nr);
			break;
		default:
			break; // its own id
		}
		if (s.verdict == Verdict::empty)
			id = 0;
		if (id == 0 && s.verdict != Verdict::unreadable)
			s.verdict = Verdict::empty; // a header with id 0 is an empty slot
		if (s.verdict == Verdict::unreadable)
			id = 0; // a header that cannot be read has no known id
		s.id = id;
	}

	switch (in.u8() % 8) {
	case 0:
		c.record = 0; // never written
		break;
	case 1:
		c.record = in.u8();
		break;
	case 2:
		c.record = in.u64();
		break;
	case 3:
		c.record = near(in, newest - c.nr);
		break;
	default:
		c.record = near(in, newest);
	}
	if (c.trust == TrustKind::present) {
		switch (in.u8() % 6) {
		case 0:
			c.trusted_from_id = in.u8() % 4; // from the start: 1 as formatted, 0 too
			break;
		case 1:
			c.trusted_from_id = in.u64();
			break;
		case 2:
			c.trusted_from_id = near(in, newest - c.nr);
			break;
		default:
			c.trusted_from_id = near(in, newest);
		}
	}
	return c;
}

void print_case(const Case& c)
{
	std::fprintf(stderr, "  nr_segments %u, record %llu, trust %s", c.nr, (unsigned long long)c.record,
		     c.trust == TrustKind::absent ? "absent" : "present");
	if (c.trust != TrustKind::absent)
		std::fprintf(stderr, " (trusted_from_id %llu%s)", (unsigned long long)c.trusted_from_id,
			     c.trusted_from_id == WB_TRUST_NONE ? " = NONE" : "");
	std::fprintf(stderr, ", torn-rewrite rule %s\n",
		     !c.torn_override ? "by the trust record" : *c.torn_override ? "forced on"
										 : "forced off");
	for (unsigned k = 0; k < c.nr; ++k)
		std::fprintf(stderr, "  slot %2u: id %llu %s\n", k, (unsigned long long)c.slots[k].id,
			     verdict_name(c.slots[k].verdict));
}

const char* action_name(Action a)
{
	switch (a) {
	case Action::apply:
		return "apply";
	case Action::restart:
		return "restart";
	case Action::stop:
		return "stop";
	case Action::lost:
		return "lost";
	}
	return "?";
}

void print_answer(const char* who, const Answer& a)
{
	std::fprintf(stderr, "  %s: refusal %d (%s) at slot %llu id %llu; lf %llu lw %llu next_id %llu; trusted_from_id %llu "
			     "write_trust %d; zero_stop_slot %d stop_slot %llu; rewrite_record %d\n    walk:",
		     who, a.refusal, wb_replay_refusal_text(wb_replay_refusal(a.refusal)), (unsigned long long)a.refusal_slot,
		     (unsigned long long)a.refusal_id, (unsigned long long)a.lf, (unsigned long long)a.lw,
		     (unsigned long long)a.next_id, (unsigned long long)a.trusted_from_id, a.write_trust, a.zero_stop_slot,
		     (unsigned long long)a.stop_slot, a.rewrite_record);
	for (unsigned i = 0; i < a.nr_events; ++i)
		std::fprintf(stderr, " %s(slot %llu, id %llu)", action_name(a.events[i].action),
			     (unsigned long long)a.events[i].slot, (unsigned long long)a.events[i].id);
	std::fprintf(stderr, "\n    slots zeroed:");
	for (unsigned i = 0; i < a.nr_drop; ++i)
		std::fprintf(stderr, " %llu", (unsigned long long)a.drop[i]);
	std::fprintf(stderr, "\n");
}

[[noreturn]] void fail(const char* what, const Case& c, const Answer& expected, const Answer& got)
{
	std::fprintf(stderr, "fuzz_replay: invariant broken: %s\n", what);
	print_case(c);
	print_answer("model   ", expected);
	print_answer("decision", got);
	std::abort();
}

// How the decision is called: what the caller passes for a slot.
enum class Caller {
	tools,   // every slot as read
	kernel,  // past the stop: id ? valid : empty; an unreadable header is never seen there
	swapped, // past the stop: valid and bad swapped
};

wb_slot_verdict c_verdict(Verdict v)
{
	switch (v) {
	case Verdict::empty:
		return WB_SLOT_EMPTY;
	case Verdict::valid:
		return WB_SLOT_VALID;
	case Verdict::bad:
		return WB_SLOT_BAD;
	case Verdict::unreadable:
		break;
	}
	return WB_SLOT_UNREADABLE;
}

bool torn_rule(const Case& c) { return c.torn_override.value_or(c.trust == TrustKind::absent); }

// The C decision, as its callers run it: begin, every step once, decide.
Answer run_decision(const Case& c, Caller caller)
{
	std::uint64_t max_id = 0;
	for (unsigned k = 0; k < c.nr; ++k)
		max_id = std::max(max_id, c.slots[k].id);
	wb_replay_walk w;
	wb_replay_walk_begin(&w, c.nr, max_id, torn_rule(c));
	Answer a;
	for (std::uint64_t step = 0; step < c.nr; ++step) {
		const std::uint64_t slot = wb_ring_slot(w.oldest_slot, step, c.nr);
		const Slot& s = c.slots[slot];
		wb_slot_verdict verdict = c_verdict(s.verdict);
		if (w.stopped) {
			if (caller == Caller::kernel)
				verdict = s.id ? WB_SLOT_VALID : WB_SLOT_EMPTY;
			else if (caller == Caller::swapped && s.verdict == Verdict::valid)
				verdict = WB_SLOT_BAD;
			else if (caller == Caller::swapped && s.verdict == Verdict::bad)
				verdict = WB_SLOT_VALID;
		}
		switch (wb_replay_walk_slot(&w, step, s.id, verdict)) {
		case WB_WALK_APPLY:
			a.add(Action::apply, slot, s.id);
			break;
		case WB_WALK_RESTART:
			a.add(Action::restart, slot, s.id);
			break;
		case WB_WALK_STOP:
			a.add(Action::stop, slot, s.id);
			break;
		case WB_WALK_LOST:
			a.add(Action::lost, slot, s.id);
			break;
		case WB_WALK_SKIP:
			break;
		}
	}
	wb_replay_plan p;
	wb_replay_decide(&w, c.record, c.trusted_from_id, &p);
	a.refusal = p.refusal;
	a.refusal_slot = p.refusal_slot;
	a.refusal_id = p.refusal_id;
	a.lf = p.last_flushed_id;
	a.lw = p.last_writeback_id;
	a.next_id = p.next_id;
	a.trusted_from_id = p.trusted_from_id;
	a.write_trust = p.write_trust;
	a.zero_stop_slot = p.zero_stop_slot;
	a.stop_slot = p.stop_slot;
	a.rewrite_record = p.rewrite_record;
	a.nr_drop = p.nr_drop_slots;
	std::copy(p.drop_slot, p.drop_slot + p.nr_drop_slots, a.drop.begin());
	return a;
}

// The rules of docs/FORMAT.md "Replay", step by step, over the same input.
Answer run_model(const Case& c)
{
	const std::uint64_t nr = c.nr;
	Answer a;
	// Step 1: the newest id. An unreadable header's id is not known.
	std::uint64_t max_id = 0;
	for (unsigned k = 0; k < c.nr; ++k)
		if (c.slots[k].verdict != Verdict::unreadable)
			max_id = std::max(max_id, c.slots[k].id);

	const bool rule = torn_rule(c);
	bool refused = false;
	auto refuse = [&](int why, std::uint64_t slot, std::uint64_t id) {
		if (refused)
			return; // the first one met in ring order wins
		refused = true;
		a.refusal = why;
		a.refusal_slot = slot;
		a.refusal_id = id;
	};
	std::uint64_t applied = 0;   // the id of the last segment applied since the start or the rewrite
	std::uint64_t rewritten = 0; // the id of the torn rewrite skipped
	std::optional<std::uint64_t> previous{};
	bool stopped = false, stop_torn_shaped = false;
	std::uint64_t stop_slot = 0, stop_id = 0;
	Verdict stop_verdict = Verdict::empty;
	// What replay zeroes: the lost slots, then the non-empty slots the walk
	// met up to the last torn rewrite (that one last).
	std::array<std::uint64_t, max_slots> lost{}, met{};
	unsigned nr_lost = 0, nr_met = 0, nr_dropped = 0;

	// Step 1 again: without a readable id, a header that could not be read is
	// all the cache says; nothing is known about it, so the log is refused
	// (the first such slot in ring order from slot 0).
	if (max_id == 0)
		for (std::uint64_t slot = 0; slot < nr; ++slot)
			if (c.slots[slot].verdict == Verdict::unreadable)
				refuse(WB_REPLAY_UNREADABLE, slot, 0);

	// Step 2: the walk, from the slot after the newest id's, every slot once.
	if (max_id > 0) {
		for (std::uint64_t step = 0; step < nr; ++step) {
			const std::uint64_t slot = (max_id % nr + step) % nr;
			const Slot& s = c.slots[slot];
			if (s.verdict == Verdict::empty)
				continue;
			const bool readable = s.verdict != Verdict::unreadable;
			// Every id read must sit in its own slot, past the stop too.
			if (readable && (s.id - 1) % nr != slot)
				refuse(WB_REPLAY_SLOT_MISMATCH, slot, s.id);
			if (stopped)
				continue;
			met[nr_met++] = slot;
			// A write lost in flight on another writer's log: among the
			// newest 8 positions behind the newest id but not the last one,
			// the id one lap older than the one expected there (valid or
			// bad); skipped as an empty slot.
			if (rule && readable && step + 1 < nr && step + 8 >= nr && s.id != 0 && s.id <= max_id &&
			    max_id - s.id == 2 * nr - 1 - step) {
				lost[nr_lost++] = slot;
				a.add(Action::lost, slot, s.id);
				continue;
			}
			// Up to the stop, ids rise in ring order (bad slots' too).
			if (readable) {
				if (previous && s.id <= *previous)
					refuse(WB_REPLAY_IDS_NOT_RISING, slot, s.id);
				previous = s.id;
			}
			if (s.verdict == Verdict::valid) {
				applied = s.id;
				a.add(Action::apply, slot, s.id);
				continue;
			}
			// A torn rewrite: in the first 8 steps but not the last, the id
			// one lap behind what a writer puts there, on a ring filled once.
			const bool torn_shaped = s.verdict == Verdict::bad && max_id >= nr && step < 8 && step + 1 < nr &&
						 s.id != 0 && s.id <= max_id && max_id - s.id == nr - 1 - step;
			if (torn_shaped && rule) {
				applied = 0;
				rewritten = s.id;
				nr_dropped = nr_met;
				a.add(Action::restart, slot, s.id);
				continue;
			}
			stopped = true;
			stop_torn_shaped = torn_shaped;
			stop_slot = slot;
			stop_id = s.id;
			stop_verdict = s.verdict;
			a.add(Action::stop, slot, s.id);
		}
	}
	// Only the newest segment may end the walk: a power cut's torn write.
	if (stopped) {
		if (stop_verdict == Verdict::unreadable)
			refuse(WB_REPLAY_UNREADABLE, stop_slot, stop_id);
		else if (stop_id != max_id)
			refuse(stop_torn_shaped ? WB_REPLAY_DAMAGED_REWRITE : WB_REPLAY_STOPS_EARLY, stop_slot, stop_id);
	}

	// Step 4: how far the log and the writeback got.
	a.lf = std::max(applied, rewritten);
	const std::uint64_t by_ring = a.lf > nr ? a.lf - nr : 0;
	a.lw = std::max({by_ring, std::min(c.record, a.lf), rewritten});
	a.next_id = a.lf + 1;
	// A record beyond the log: the backing device may be newer than any copy.
	a.trusted_from_id = c.trusted_from_id;
	if (c.record > a.lf && c.trusted_from_id != WB_TRUST_NONE && c.trusted_from_id <= a.lf) {
		a.trusted_from_id = a.lf + 1;
		a.write_trust = true;
	}
	a.zero_stop_slot = stopped;
	a.stop_slot = stop_slot;
	a.rewrite_record = c.record > a.lf;
	for (unsigned i = 0; i < nr_lost; ++i)
		a.drop[a.nr_drop++] = lost[i];
	for (unsigned i = 0; i < nr_dropped; ++i)
		a.drop[a.nr_drop++] = met[i];
	return a;
}

void compare(const char* caller, const Case& c, const Answer& model, const Answer& got)
{
	static char what[160];
	auto check = [&](bool same, const char* field) {
		if (!same) {
			std::snprintf(what, sizeof what, "the decision (called as the %s do) and the model differ in %s", caller,
				      field);
			fail(what, c, model, got);
		}
	};
	check(got.refusal == model.refusal, "the refusal");
	if (model.refusal != WB_REPLAY_OK)
		check(got.refusal_slot == model.refusal_slot && got.refusal_id == model.refusal_id,
		      "the refusal's slot or id");
	check(got.nr_events == model.nr_events &&
		      std::equal(got.events.begin(), got.events.begin() + got.nr_events, model.events.begin()),
	      "the walk's actions (apply, restart, stop)");
	check(got.lf == model.lf, "last_flushed_id");
	check(got.lw == model.lw, "last_writeback_id");
	check(got.next_id == model.next_id, "next_id");
	check(got.trusted_from_id == model.trusted_from_id, "trusted_from_id");
	check(got.write_trust == model.write_trust, "write_trust");
	check(got.zero_stop_slot == model.zero_stop_slot, "zero_stop_slot");
	if (model.zero_stop_slot)
		check(got.stop_slot == model.stop_slot, "stop_slot");
	check(got.rewrite_record == model.rewrite_record, "rewrite_record");
	check(got.nr_drop == model.nr_drop && std::equal(got.drop.begin(), got.drop.begin() + got.nr_drop, model.drop.begin()),
	      "the discarded slots to zero");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
	Input in(data, size);
	const Case c = decode(in);
	const Answer model = run_model(c);
	const Answer tools = run_decision(c, Caller::tools);
	compare("tools", c, model, tools);
	// Past the stop the verdict is not looked at: the kernel's (it reads
	// nothing there) and swapped ones give the same plan.
	compare("kernel", c, model, run_decision(c, Caller::kernel));
	compare("tools, verdicts past the stop swapped,", c, model, run_decision(c, Caller::swapped));
	return 0;
}
