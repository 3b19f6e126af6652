// tclm/error.h: the exceptions that tclm's public API throws.
#pragma once

#include <stdexcept>
#include <string>

namespace tclm {

/// Thrown for bad user input (a file that cannot be read, a malformed weights file, an option out of
/// range, features of another encoding version, ...). The message names the file, line or option and
/// says what to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown when an internal invariant fails: a bug in tclm, not a problem of the input. A subclass of
/// Error so that callers that catch Error still see it; the tclm tool maps it to exit code 3.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace tclm
