# cmake -DIN=<file.cu> -DOUT=<file.cc> -P cuda_to_cc.cmake
# Rewrites a CUDA source into C++ that the CPU emulator compiles (tests/cuda_emu): each launch
#   Name<<<grid, block, shared, stream>>>(args...)  ->  ::cuda_emu::Launch(grid, block, shared, stream, Name, args...)
# (argument lists may span lines), and each dynamic shared memory declaration
#   extern __shared__ [__align__(n)] T name[];      ->  T* name = reinterpret_cast<T*>(::cuda_emu::DynamicSharedMemory());
# Everything else is compiled as written, against the headers in fake/. The build fails if a
# file has no launch or no dynamic shared memory (the patterns no longer match the source), or
# if any <<< >>> or __shared__ is left that these patterns did not take: the test then cannot
# silently stop covering a kernel.
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DIN=<file.cu> -DOUT=<file.cc> -P cuda_to_cc.cmake")
endif()
file(READ "${IN}" src)

set(id "[A-Za-z_][A-Za-z0-9_]*")
set(sp "[ \t\r\n]")
# `extern __shared__ __align__(128) unsigned char smem[];`: \2 the type, \4 the name.
set(shared_re "extern${sp}+__shared__${sp}+(__align__${sp}*\\([^)]*\\)${sp}+)?(${id}(${sp}+${id})*)${sp}+(${id})${sp}*\\[${sp}*\\]${sp}*;")
string(REGEX REPLACE "${shared_re}"
       "/*cuda_emu:shared*/ \\2* \\4 = reinterpret_cast<\\2*>(::cuda_emu::DynamicSharedMemory());"
       src "${src}")
# Launches: the configuration between <<< and the first >>>, then the argument list's `(`. A
# launch without arguments first (no comma after the kernel's name).
set(config "(([^>]|>[^>]|>>[^>])*)")
string(REGEX REPLACE "(${id})${sp}*<<<${config}>>>${sp}*\\(${sp}*\\)"
       "/*cuda_emu:launch*/ ::cuda_emu::Launch(\\2, \\1)" src "${src}")
string(REGEX REPLACE "(${id})${sp}*<<<${config}>>>${sp}*\\("
       "/*cuda_emu:launch*/ ::cuda_emu::Launch(\\2, \\1, " src "${src}")

string(REGEX MATCHALL "cuda_emu:shared" shared "${src}")
string(REGEX MATCHALL "cuda_emu:launch" launches "${src}")
list(LENGTH shared n_shared)
list(LENGTH launches n_launches)
if(n_launches EQUAL 0)
  message(FATAL_ERROR "cuda_to_cc: no kernel launch `Name<<<grid, block, shared, stream>>>(` in ${IN}")
endif()
if(n_shared EQUAL 0)
  message(FATAL_ERROR "cuda_to_cc: no `extern __shared__ T name[];` in ${IN}")
endif()
foreach(left "<<<" ">>>" "__shared__")
  string(FIND "${src}" "${left}" at)
  if(NOT at EQUAL -1)
    string(SUBSTRING "${src}" ${at} 120 context)
    message(FATAL_ERROR "cuda_to_cc: `${left}` left in ${IN} after the rewrite, which the CPU "
            "emulator cannot run as written (tests/cuda_emu/cuda_to_cc.cmake): ${context}")
  endif()
endforeach()

file(WRITE "${OUT}.tmp"
     "// Generated from ${IN} by tests/cuda_emu/cuda_to_cc.cmake (${n_launches} launches, "
     "${n_shared} dynamic shared memory declarations rewritten): do not edit.\n"
     "#line 1 \"${IN}\"\n" "${src}")
file(RENAME "${OUT}.tmp" "${OUT}")
