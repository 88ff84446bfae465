# CUDA toolkit pieces and NCCL. Nothing here links libcuda.so: cudart is static
# and reaches the driver with dlopen; driver functions go through
# cudaGetDriverEntryPointByVersion. NCCL and cuBLAS are dlopened on first use.
find_package(CUDAToolkit REQUIRED)

set(_tcuda_cuda_inc ${CUDAToolkit_INCLUDE_DIRS})
find_path(TCUDA_NVTX3_INCLUDE nvtx3/nvToolsExt.h HINTS ${_tcuda_cuda_inc})
find_path(TCUDA_CURAND_INCLUDE curand_kernel.h HINTS ${_tcuda_cuda_inc})
find_path(TCUDA_CUBLAS_INCLUDE cublas_v2.h HINTS ${_tcuda_cuda_inc})
foreach(v TCUDA_NVTX3_INCLUDE TCUDA_CURAND_INCLUDE TCUDA_CUBLAS_INCLUDE)
  if(NOT ${v})
    message(FATAL_ERROR "tcuda: ${v} not found under the CUDA toolkit (${_tcuda_cuda_inc})")
  endif()
endforeach()

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_tcuda_cuda_inc} /usr/include /usr/local/include ENV NCCL_HOME PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib /usr/lib/x86_64-linux-gnu ENV NCCL_HOME
  PATH_SUFFIXES lib lib64)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR "tcuda: NCCL not found (nccl.h / libnccl.so). Set NCCL_HOME or install libnccl-dev.")
endif()
message(STATUS "tcuda: NCCL ${NCCL_LIBRARY} (${NCCL_INCLUDE_DIR})")

# dlpack.h: system copy first, then the copies shipped inside Python packages
# (the GPU machine has it only there).
set(_dlpack_hints /usr/include /usr/local/include)
find_program(TCUDA_PYTHON3 python3)
if(TCUDA_PYTHON3)
  execute_process(COMMAND ${TCUDA_PYTHON3} -c "import sysconfig;print(sysconfig.get_paths()['purelib'])"
    OUTPUT_VARIABLE _py_site OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_py_site)
    list(APPEND _dlpack_hints ${_py_site}/torch/include ${_py_site}/cupy/_core/include/cupy/_dlpack
         ${_py_site}/jaxlib/include)
  endif()
endif()
find_path(TCUDA_DLPACK_INCLUDE dlpack/dlpack.h HINTS ${_dlpack_hints})
if(NOT TCUDA_DLPACK_INCLUDE)
  # Python packages ship a bare dlpack.h: give it the dlpack/ prefix through
  # a forwarding header in the build tree.
  find_path(TCUDA_DLPACK_BARE dlpack.h
    HINTS ${_py_site}/cupy/_core/include/cupy/_dlpack ${_py_site}/torch/include/ATen
          ${_py_site}/jaxlib/include/dlpack)
  if(TCUDA_DLPACK_BARE)
    file(WRITE ${PROJECT_BINARY_DIR}/dlpack-shim/dlpack/dlpack.h
         "#include \"${TCUDA_DLPACK_BARE}/dlpack.h\"\n")
    set(TCUDA_DLPACK_INCLUDE ${PROJECT_BINARY_DIR}/dlpack-shim CACHE PATH "" FORCE)
  endif()
endif()
if(TCUDA_DLPACK_INCLUDE)
  message(STATUS "tcuda: dlpack ${TCUDA_DLPACK_INCLUDE}")
else()
  message(STATUS "tcuda: dlpack.h not found (apt-get install libdlpack-dev, or pip install torch or cupy); "
                 "the comm layer (DLPack tensors) will be unavailable")
endif()
