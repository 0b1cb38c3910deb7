// The index's in-place parallel sort gives exactly std::sort's order, on key
// sets that exercise its buckets: uniform, clustered, one key, full 64-bit range.
#include "scan/bucket_sort.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

// Packed like the scan's metablock entries: the sort must not assume alignment.
struct __attribute__((packed)) Entry {
	std::uint64_t key;
	std::uint32_t order; // ties on key broken by this, as replay order breaks them
	std::uint8_t tag;
	bool operator==(const Entry& o) const { return key == o.key && order == o.order && tag == o.tag; }
};

bool entry_less(const Entry& a, const Entry& b)
{
	if (a.key != b.key)
		return a.key < b.key;
	return a.order < b.order;
}

std::uint64_t entry_key(const Entry& e)
{
	return e.key;
}

void expect_same_as_std_sort(std::vector<Entry> entries, unsigned threads)
{
	std::vector<Entry> expected = entries;
	std::sort(expected.begin(), expected.end(), entry_less);
	wbkit::detail::bucket_sort(entries.data(), entries.size(), entry_key, entry_less, threads);
	ASSERT_EQ(entries.size(), expected.size());
	for (std::size_t i = 0; i < entries.size(); ++i)
		ASSERT_TRUE(entries[i] == expected[i]) << "first difference at " << i << " of " << entries.size();
}

std::vector<Entry> make_entries(std::size_t n, std::uint64_t seed, auto&& key_of)
{
	std::mt19937_64 rng(seed);
	std::vector<Entry> v(n);
	for (std::size_t i = 0; i < n; ++i)
		v[i] = Entry{.key = key_of(rng), .order = std::uint32_t(i), .tag = std::uint8_t(rng())};
	std::shuffle(v.begin(), v.end(), rng);
	return v;
}

TEST(BucketSort, UniformKeysOnEveryThreadCount)
{
	for (unsigned threads : {1u, 2u, 4u})
		expect_same_as_std_sort(make_entries(60'000, threads, [](auto& rng) { return rng() % (1ULL << 25) * 8; }),
					threads);
}

TEST(BucketSort, ManyDuplicateKeysKeepTheirTieOrder)
{
	expect_same_as_std_sort(make_entries(40'000, 7, [](auto& rng) { return rng() % 300 * 8; }), 2);
}

TEST(BucketSort, OneKeyOnly)
{
	expect_same_as_std_sort(make_entries(20'000, 8, [](auto&) { return 4096ULL; }), 2);
}

TEST(BucketSort, SkewedKeysSplitTheirBigBucketAgain)
{
	// Almost everything in the lowest 1/1024th of the range, a few outliers at the top.
	expect_same_as_std_sort(make_entries(40'000, 9,
					     [](auto& rng) {
						     return rng() % 64 == 0 ? ~0ULL - rng() % 1000 : rng() % 100'000;
					     }),
				2);
}

TEST(BucketSort, FullRangeAndSmallInputs)
{
	expect_same_as_std_sort(make_entries(40'000, 10, [](auto& rng) { return rng(); }), 2);
	expect_same_as_std_sort(make_entries(wbkit::detail::bucket_sort_min_elements + 1, 11,
					     [](auto& rng) { return rng() % 2 ? 0ULL : ~0ULL; }),
				2);
	for (std::size_t n : {0, 1, 2, 1000})
		expect_same_as_std_sort(make_entries(n, 12, [](auto& rng) { return rng(); }), 2);
}

} // namespace
