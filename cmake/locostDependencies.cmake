# Finds locost's dependencies (all from Debian packages) and defines imported targets for the
# ones that ship no CMake package: locost::fftw3f (with its threads library),
# locost::sentencepiece, locost::pcre2 (8-bit PCRE2: the byte-level BPE pre-tokenizer's
# \p{L}/\p{N} pattern), locost::openblas, locost::dnnl (oneDNN: bfloat16 products). Used by the source tree and by the installed
# locostConfig.cmake alike, so a consumer sees the same set.
include(CMakeFindDependencyMacro)
set(_locost_missing "")

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Eigen3 3.4 CONFIG QUIET)
if(NOT Eigen3_FOUND)
  list(APPEND _locost_missing "Eigen3 (Debian: libeigen3-dev)")
endif()
find_package(nlohmann_json 3.10 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  list(APPEND _locost_missing "nlohmann_json (Debian: nlohmann-json3-dev)")
endif()

function(_locost_import target header lib_names pkg)
  if(TARGET ${target})
    return()
  endif()
  set(_libs "")
  find_path(_inc_${header} NAMES ${header})
  foreach(_n IN LISTS lib_names)
    find_library(_lib_${_n} NAMES ${_n})
    if(NOT _lib_${_n})
      set(_locost_missing "${_locost_missing};${_n} (Debian: ${pkg})" PARENT_SCOPE)
      return()
    endif()
    list(APPEND _libs ${_lib_${_n}})
  endforeach()
  if(NOT _inc_${header})
    set(_locost_missing "${_locost_missing};${header} (Debian: ${pkg})" PARENT_SCOPE)
    return()
  endif()
  add_library(${target} INTERFACE IMPORTED)
  set_target_properties(${target} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_inc_${header}}"
    INTERFACE_LINK_LIBRARIES "${_libs}")
endfunction()

# Single precision (the production path, with its threads library) and double (the reference path).
_locost_import(locost::fftw3f fftw3.h "fftw3f_threads;fftw3f;fftw3" libfftw3-dev)
# xsimd is header-only; its Debian CMake package (8.1) names an optional 'xtl' link library
# that is not installed with it, so we take the headers only.
_locost_import(locost::xsimd xsimd/xsimd.hpp "" libxsimd-dev)
_locost_import(locost::sentencepiece sentencepiece_processor.h sentencepiece libsentencepiece-dev)
_locost_import(locost::pcre2 pcre2.h pcre2-8 libpcre2-dev)
if(LOCOST_USE_OPENBLAS_CONFIG)
  _locost_import(locost::openblas cblas.h openblas libopenblas-dev)
endif()
if(LOCOST_USE_ONEDNN_CONFIG)
  _locost_import(locost::dnnl oneapi/dnnl/dnnl.hpp dnnl libdnnl-dev)
endif()

list(REMOVE_ITEM _locost_missing "")
if(_locost_missing)
  list(JOIN _locost_missing ", " _msg)
  set(locost_FOUND FALSE)
  set(locost_NOT_FOUND_MESSAGE "locost: missing dependencies: ${_msg}")
  if(NOT locost_CONFIG_MODE)
    message(FATAL_ERROR "locost: missing dependencies: ${_msg}")
  endif()
endif()
