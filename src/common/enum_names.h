// common/enum_names.h: an enum parsed from, and printed as, a name of a fixed table (options such as
// --select, --loss, --model). The table lists the names in the enum's order, so value i is names[i].
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "tclm/error.h"

namespace tclm {

/// The value whose name is `name`; else a tclm::Error "unknown <kind> '<name>' (<what>): one of ...".
template <class E>
E enum_from_name(const std::vector<std::string>& names, const std::string& name, const char* kind,
                 const std::string& what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  throw Error(fmt::format("unknown {} '{}' ({}): one of {}", kind, name, what, fmt::join(names, ", ")));
}

/// The name of `value` (its index in `names`).
template <class E>
const std::string& enum_name(const std::vector<std::string>& names, E value) {
  return names.at(static_cast<size_t>(value));
}

}  // namespace tclm
