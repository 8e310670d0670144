// Eigen aliases for the CPU runtime: row-major matrices and maps over flat buffers.
// Every operator takes raw pointers and maps them (llm.c's convention), so one buffer layout
// serves the CPU kernels here and the CUDA kernels later.
#pragma once

#include <Eigen/Core>

namespace shardsim::runtime {

// Row-major, so a (rows, cols) buffer in C order maps without copies.
template <typename S>
using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using MatrixMap = Eigen::Map<Matrix<S>>;
template <typename S>
using ConstMatrixMap = Eigen::Map<const Matrix<S>>;

template <typename S>
using RowVector = Eigen::Matrix<S, 1, Eigen::Dynamic>;
template <typename S>
using RowVectorMap = Eigen::Map<RowVector<S>>;
template <typename S>
using ConstRowVectorMap = Eigen::Map<const RowVector<S>>;

}  // namespace shardsim::runtime
