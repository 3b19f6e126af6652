// tclm/error.h: the one exception type that tclm's public API throws.
#pragma once

#include <stdexcept>
#include <string>

namespace tclm {

/// Thrown for bad user input (a file that cannot be read, a malformed weights file, an option out of
/// range, features of another encoding version, ...). The message names the file, line or option and
/// says what to do. Internal invariant failures also throw Error, prefixed "internal error:".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tclm
