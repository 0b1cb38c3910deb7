// The stamped block workload of tests/vm/wbstamp.c, for checking device
// images in process (the crash-state checker looks at thousands of them).
// It must generate exactly what wbstamp writes: the crash-smoke test compares
// an image built here with `wbstamp image` byte for byte.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace wbkit::testing {

struct StampWorkload {
	std::uint64_t seed = 0;
	std::uint64_t region_offset = 0; // bytes, 4 KiB aligned
	std::uint64_t region_size = 0;   // bytes, 4 KiB multiple
	unsigned partial_pct = 0;
	unsigned discard_pct = 0; // ops that discard 1..8 whole blocks (read back as zeros)

	static constexpr unsigned sector = 512;
	static constexpr unsigned block = 4096;

	struct Op {
		std::uint64_t sector = 0;
		unsigned nr_sectors = 0;
		bool discard = false;
		bool covers(std::uint64_t s) const { return s >= sector && s < sector + nr_sectors; }
	};

	static std::uint64_t splitmix64(std::uint64_t& state)
	{
		std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		return z ^ (z >> 31);
	}

	Op op_at(std::uint64_t seq) const
	{
		std::uint64_t state = seed * 0xd1342543de82ef95ULL ^ seq;
		const std::uint64_t kind = splitmix64(state);
		const std::uint64_t where = splitmix64(state);
		const std::uint64_t first_sector = region_offset / sector;
		if (discard_pct && kind % 100 >= 100 - discard_pct) {
			const std::uint64_t blocks = region_size / block;
			const std::uint64_t first = where % blocks;
			const std::uint64_t n = std::min<std::uint64_t>(1 + (kind / 100) % 8, blocks - first);
			return {first_sector + first * (block / sector), unsigned(n * (block / sector)), true};
		}
		if (kind % 100 < partial_pct)
			return {first_sector + where % (region_size / sector), 1};
		return {first_sector + where % (region_size / block) * (block / sector), block / sector};
	}

	std::uint64_t filler_word(std::uint64_t seq) const
	{
		std::uint64_t state = seed ^ (seq * 0x2545f4914f6cdd1dULL);
		return splitmix64(state);
	}

	static void put_le64(unsigned char* p, std::uint64_t v)
	{
		for (int i = 0; i < 8; ++i)
			p[i] = static_cast<unsigned char>(v >> (8 * i));
	}
	static std::uint64_t get_le64(const unsigned char* p)
	{
		std::uint64_t v = 0;
		for (int i = 7; i >= 0; --i)
			v = (v << 8) | p[i];
		return v;
	}

	void stamp_sector(unsigned char* buf, std::uint64_t s, std::uint64_t seq) const
	{
		const std::uint64_t word = filler_word(seq);
		std::memcpy(buf, "WBSTAMP1", 8);
		put_le64(buf + 8, s * sector);
		put_le64(buf + 16, seq);
		put_le64(buf + 24, seed);
		for (unsigned off = 32; off < sector; off += 8)
			put_le64(buf + off, word);
	}

	// The write whose stamp the sector holds, or 0.
	std::uint64_t stamp_seq(const unsigned char* buf, std::uint64_t s) const
	{
		if (std::memcmp(buf, "WBSTAMP1", 8) != 0 || get_le64(buf + 8) != s * sector || get_le64(buf + 24) != seed)
			return 0;
		const std::uint64_t seq = get_le64(buf + 16);
		unsigned char expected[sector];
		stamp_sector(expected, s, seq);
		return std::memcmp(buf, expected, sector) == 0 ? seq : 0;
	}

	static bool all_zero(const unsigned char* buf)
	{
		for (unsigned i = 0; i < sector; ++i)
			if (buf[i])
				return false;
		return true;
	}
};

} // namespace wbkit::testing
