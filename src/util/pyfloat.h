// Python's repr() of a float: shortest round-trip digits, scientific notation
// when the decimal exponent is < -4 or >= 16, and a ".0" on integral values.
#pragma once
#include <string>

namespace ckpt::util {
std::string python_float_repr(double d);
}
