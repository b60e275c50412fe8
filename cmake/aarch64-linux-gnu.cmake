# Cross-compiling for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu and the arm64 versions
# of the dependencies (Debian multiarch: /usr/lib/aarch64-linux-gnu; packages that cannot be
# installed beside their amd64 versions unpacked under LOCOST_ARM64_EXTRA, as
# scripts/cross-aarch64.sh does). Programs run under qemu-aarch64 (Debian's qemu-user).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(LOCOST_ARM64_EXTRA "" CACHE PATH "Root of arm64 packages unpacked beside the system's (usr/include, usr/lib/aarch64-linux-gnu)")
if(LOCOST_ARM64_EXTRA)
  list(APPEND CMAKE_PREFIX_PATH "${LOCOST_ARM64_EXTRA}/usr")
  include_directories(SYSTEM "${LOCOST_ARM64_EXTRA}/usr/include")
  # (their own dependencies, e.g. SentencePiece's protobuf-lite, are found there at link time)
  set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${LOCOST_ARM64_EXTRA}/usr/lib/aarch64-linux-gnu")
  set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${LOCOST_ARM64_EXTRA}/usr/lib/aarch64-linux-gnu")
endif()
# No -L /usr/aarch64-linux-gnu: with the arm64 libc6 installed (multiarch, a dependency of the arm64
# packages above), that prefix's loader would load the multiarch libc of another build, and their
# private structures differ: the first pthread_create then loops for ever in the stack cache. The
# multiarch loader (/lib/ld-linux-aarch64.so.1) goes with the multiarch libc.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
