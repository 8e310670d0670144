# cmake -DIN=<file.cu> -DOUT=<file.cc> [-DEXPECT=launch;shared;static_shared] -P cuda_to_cc.cmake
# Rewrites a CUDA source (or a header of device code) into C++ that the CPU emulator compiles
# (tests/cuda_emu):
#   launch         Name<<<grid, block, shared, stream>>>(args...)
#                  -> ::cuda_emu::Launch(grid, block, shared, stream, CUDA_EMU_KERNEL(Name), args...)
#                  (argument lists may span lines; Name may be a template, deduced as CUDA does)
#   shared         extern __shared__ [__align__(n)] T name[];
#                  -> T* name = reinterpret_cast<T*>(::cuda_emu::DynamicSharedMemory());
#   static_shared  __shared__ T name[N];
#                  -> auto& name = ::cuda_emu::StaticShared<T[N]>([] {});
# (emu_launch.h says why the last is the block's own array). Everything else is compiled as
# written, against the headers in fake/. The build fails if a rewrite listed in EXPECT (default:
# launch;shared) takes nothing (the patterns no longer match the source), or if any <<< >>> or
# __shared__ is left that these patterns did not take: the test then cannot silently stop
# covering a kernel.
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DIN=<file.cu> -DOUT=<file.cc> [-DEXPECT=...] -P cuda_to_cc.cmake")
endif()
if(NOT DEFINED EXPECT)
  set(EXPECT launch shared)
endif()
file(READ "${IN}" src)

set(id "[A-Za-z_][A-Za-z0-9_]*")
set(sp "[ \t\r\n]")
# `extern __shared__ __align__(128) unsigned char smem[];`: \2 the type, \4 the name.
set(shared_re "extern${sp}+__shared__${sp}+(__align__${sp}*\\([^)]*\\)${sp}+)?(${id}(${sp}+${id})*)${sp}+(${id})${sp}*\\[${sp}*\\]${sp}*;")
string(REGEX REPLACE "${shared_re}"
       "/*cuda_emu:shared*/ \\2* \\4 = reinterpret_cast<\\2*>(::cuda_emu::DynamicSharedMemory());"
       src "${src}")
# `__shared__ T warp_sums[32];`: \2 the type, \4 the name, \5 the size.
set(static_re "__shared__${sp}+(__align__${sp}*\\([^)]*\\)${sp}+)?(${id}(${sp}+${id})*)${sp}+(${id})${sp}*\\[([^];]+)\\]${sp}*;")
string(REGEX REPLACE "${static_re}"
       "/*cuda_emu:static_shared*/ auto& \\4 = ::cuda_emu::StaticShared<\\2[\\5]>([] {});"
       src "${src}")
# Launches: the configuration between <<< and the first >>>, then the argument list's `(`. A
# launch without arguments first (no comma after the kernel's name).
set(config "(([^>]|>[^>]|>>[^>])*)")
string(REGEX REPLACE "(${id})${sp}*<<<${config}>>>${sp}*\\(${sp}*\\)"
       "/*cuda_emu:launch*/ ::cuda_emu::Launch(\\2, CUDA_EMU_KERNEL(\\1))" src "${src}")
string(REGEX REPLACE "(${id})${sp}*<<<${config}>>>${sp}*\\("
       "/*cuda_emu:launch*/ ::cuda_emu::Launch(\\2, CUDA_EMU_KERNEL(\\1), " src "${src}")

set(counts)
foreach(kind launch shared static_shared)
  string(REGEX MATCHALL "cuda_emu:${kind}\\*/" found "${src}")
  list(LENGTH found n_${kind})
  list(APPEND counts "${n_${kind}} ${kind}")
endforeach()
foreach(kind ${EXPECT})
  if(NOT DEFINED n_${kind})
    message(FATAL_ERROR "cuda_to_cc: unknown rewrite `${kind}` in EXPECT")
  endif()
  if(n_${kind} EQUAL 0)
    message(FATAL_ERROR "cuda_to_cc: no `${kind}` rewritten in ${IN} (the pattern in "
            "tests/cuda_emu/cuda_to_cc.cmake no longer matches the source)")
  endif()
endforeach()
foreach(left "<<<" ">>>" "__shared__")
  string(FIND "${src}" "${left}" at)
  if(NOT at EQUAL -1)
    string(SUBSTRING "${src}" ${at} 120 context)
    message(FATAL_ERROR "cuda_to_cc: `${left}` left in ${IN} after the rewrite, which the CPU "
            "emulator cannot run as written (tests/cuda_emu/cuda_to_cc.cmake): ${context}")
  endif()
endforeach()

string(REPLACE ";" ", " counts "${counts}")
file(WRITE "${OUT}.tmp"
     "// Generated from ${IN} by tests/cuda_emu/cuda_to_cc.cmake (rewritten: ${counts}): do not "
     "edit.\n#line 1 \"${IN}\"\n" "${src}")
file(RENAME "${OUT}.tmp" "${OUT}")
