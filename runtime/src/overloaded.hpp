#pragma once
// Overloaded: a set of lambdas as one std::visit visitor. At runtime/src's root, below every
// folder, since the programs' visitors (program/) and the elementwise tasks' (elementwise.cpp,
// cpu/, cuda/) both use it.

namespace cgemm {

/// A set of lambdas as one visitor: std::visit(Overloaded{[](const GemmOp&) {...}, ...}, op).
/// Without a catch-all lambda, an alternative no lambda takes is a compile error.
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};

}  // namespace cgemm
