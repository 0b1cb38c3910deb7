// A disk with a volatile write cache of its own, for power cuts of programs
// that write two devices (a replay writes the backing device, then marks the
// cache clean).
//
// Writes stay in the device's cache until flush() moves them to the media
// (the inner device), in the order they were written. A PowerCut shared by
// the devices of one machine ends the power after a number of operations
// (writes and flushes, on any of them): from then on every operation fails
// with EIO, as on a machine that is off. lose_unflushed() then decides what
// the media kept of the cache: nothing, everything, or any subset of the
// writes, one of them torn at sector granularity. A flush of one device
// makes nothing of another durable.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "wbkit/device.hpp"

namespace wbkit::testing {

// The power of one machine: `budget` operations, then off.
class PowerCut {
public:
	explicit PowerCut(std::uint64_t budget = UINT64_MAX) : budget_(budget) {}
	// True when the operation may run (and counts it).
	bool take()
	{
		if (budget_ == 0)
			return false;
		--budget_;
		++operations_;
		return true;
	}
	bool off() const { return budget_ == 0; }
	std::uint64_t operations() const { return operations_; }

private:
	std::uint64_t budget_;
	std::uint64_t operations_ = 0;
};

// What the media kept of a volatile cache at the cut.
enum class CacheLoss {
	all_lost, // nothing unflushed reached the media
	all_kept, // everything did (in order)
	subset,   // any subset of the writes, one of them torn
};

class VolatileDevice final : public Device {
public:
	VolatileDevice(Device& media, PowerCut& power, std::string name)
		: media_(media), power_(power), name_(std::move(name))
	{
	}

	const std::string& path() const noexcept override { return name_; }
	std::uint64_t size_bytes() const noexcept override { return media_.size_bytes(); }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return media_.identity(); }

	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override
	{
		if (power_.off())
			return EIO;
		if (int err = media_.read_at(offset, buf))
			return err;
		// The cache answers for what it holds.
		for (const Write& w : cached_) {
			const std::uint64_t begin = std::max(offset, w.offset);
			const std::uint64_t end = std::min(offset + buf.size(), w.offset + w.data.size());
			if (begin < end)
				std::copy_n(w.data.begin() + std::ptrdiff_t(begin - w.offset), end - begin,
					    buf.begin() + std::ptrdiff_t(begin - offset));
		}
		return 0;
	}

	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		if (!power_.take())
			return EIO;
		if (offset + buf.size() > size_bytes())
			return EINVAL;
		cached_.push_back({offset, std::vector<std::byte>(buf.begin(), buf.end())});
		return 0;
	}

	int flush() noexcept override
	{
		if (!power_.take())
			return EIO;
		for (const Write& w : cached_)
			if (int err = media_.write_at(w.offset, w.data))
				return err;
		cached_.clear();
		++flushes_;
		return 0;
	}

	// The cut: what of the cache reaches the media.
	void lose_unflushed(CacheLoss loss, std::mt19937_64& rng)
	{
		std::vector<Write> cached;
		cached.swap(cached_);
		if (loss == CacheLoss::all_lost || cached.empty())
			return;
		const std::size_t torn = loss == CacheLoss::subset ? rng() % cached.size() : cached.size();
		for (std::size_t i = 0; i < cached.size(); ++i) {
			const Write& w = cached[i];
			if (loss == CacheLoss::subset && i != torn && (rng() & 1))
				continue;
			for (std::uint64_t s = 0; s < w.data.size(); s += 512) {
				if (i == torn && (rng() & 1))
					continue;
				const std::size_t n = std::size_t(std::min<std::uint64_t>(512, w.data.size() - s));
				(void)media_.write_at(w.offset + s, std::span(w.data).subspan(std::size_t(s), n));
			}
		}
	}

	std::size_t unflushed_writes() const { return cached_.size(); }
	std::uint64_t flushes() const { return flushes_; }

private:
	struct Write {
		std::uint64_t offset;
		std::vector<std::byte> data;
	};
	Device& media_;
	PowerCut& power_;
	std::string name_;
	std::vector<Write> cached_;
	std::uint64_t flushes_ = 0;
};

} // namespace wbkit::testing
