// Little-endian loads and stores through memcpy: no alignment or byte-order
// assumptions, no casts into packed structs.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace wbkit {

template <typename T>
constexpr T byteswap_unsigned(T value)
{
	if constexpr (sizeof(T) == 1)
		return value;
	else if constexpr (sizeof(T) == 2)
		return __builtin_bswap16(value);
	else if constexpr (sizeof(T) == 4)
		return __builtin_bswap32(value);
	else
		return __builtin_bswap64(value);
}

template <typename T>
inline T load_le(std::span<const std::byte> buf, std::size_t offset)
{
	static_assert(std::is_unsigned_v<T>);
	T value;
	std::memcpy(&value, buf.subspan(offset, sizeof(T)).data(), sizeof(T));
	if constexpr (std::endian::native == std::endian::big)
		value = byteswap_unsigned(value);
	return value;
}

template <typename T>
inline void store_le(std::span<std::byte> buf, std::size_t offset, T value)
{
	static_assert(std::is_unsigned_v<T>);
	if constexpr (std::endian::native == std::endian::big)
		value = byteswap_unsigned(value);
	std::memcpy(buf.subspan(offset, sizeof(T)).data(), &value, sizeof(T));
}

} // namespace wbkit
