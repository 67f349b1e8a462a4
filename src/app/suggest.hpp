#pragma once
// "Did you mean": the known word closest to a mistyped one. Pure (no I/O).
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace certfleet::app {

// The candidate at the smallest edit distance (insert, delete, replace, swap of neighbours) from
// `word`, when that distance is at most 2 and at most a third of the word's length (rounded up);
// the first such candidate on a tie. nullopt: nothing close.
std::optional<std::string> closest_word(std::string_view word, std::span<const std::string> candidates);

}  // namespace certfleet::app
