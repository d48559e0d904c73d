# The CUDA backend's kernels: finding nvcc, and building kernels/cuda/<module>.cu into
# fatbins embedded in the module as C arrays.
#
# The project stays LANGUAGE C: nvcc is driven with add_custom_command, so CMake's CUDA
# language (and its compiler checks) is never enabled.  Each module is compiled once
# per target (sm_80 and sm_90a machine code, compute_90 PTX for newer GPUs), the
# images are packed with the toolkit's fatbinary, and MetraleEmbedCuda.cmake writes the
# C source, listing per target the manifest kernels each image really holds.

set(METRALE_CUDA_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})

# Where nvcc is looked for, besides PATH: CUDACXX, CUDA_PATH, CUDA_HOME, then the usual
# installation folders (nvcc is often not on PATH).
set(METRALE_CUDA_SEARCH_PATHS /usr/local/cuda/bin /opt/cuda/bin /usr/lib/cuda/bin)

# Target name | nvcc output kind and code | fatbinary image.  Adding a GPU generation is
# one line here.
set(METRALE_CUDA_TARGETS
  "sm_80|-cubin|arch=compute_80,code=sm_80|kind=elf,sm=80"
  "sm_90a|-cubin|arch=compute_90a,code=sm_90a|kind=elf,sm=90a"
  "compute_90|-ptx|arch=compute_90,code=compute_90|kind=ptx,sm=90")

# metrale_find_nvcc(FOUND_VAR REASON_VAR): finds nvcc and fatbinary and checks, once per
# nvcc, that it can build for sm_90a (CUDA 12 or newer with a usable host compiler).
function(metrale_find_nvcc found_var reason_var)
  set(hints)
  if(DEFINED ENV{CUDACXX})
    get_filename_component(d "$ENV{CUDACXX}" DIRECTORY)
    list(APPEND hints ${d})
  endif()
  foreach(e CUDA_PATH CUDA_HOME)
    if(DEFINED ENV{${e}})
      list(APPEND hints $ENV{${e}}/bin)
    endif()
  endforeach()
  find_program(METRALE_NVCC nvcc HINTS ${hints} PATHS ${METRALE_CUDA_SEARCH_PATHS}
               DOC "nvcc that builds the CUDA backend's kernels")
  if(NOT METRALE_NVCC)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "nvcc not found (searched PATH, CUDACXX, CUDA_PATH, CUDA_HOME, ${METRALE_CUDA_SEARCH_PATHS}; set METRALE_NVCC)" PARENT_SCOPE)
    return()
  endif()
  get_filename_component(bindir ${METRALE_NVCC} DIRECTORY)
  find_program(METRALE_FATBINARY fatbinary HINTS ${bindir} NO_DEFAULT_PATH
               DOC "fatbinary of the same toolkit as METRALE_NVCC")
  if(NOT METRALE_FATBINARY)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "fatbinary not found next to ${METRALE_NVCC}" PARENT_SCOPE)
    return()
  endif()

  if(NOT METRALE_NVCC_PROBED STREQUAL METRALE_NVCC)
    set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/metrale-nvcc-probe)
    file(MAKE_DIRECTORY ${dir})
    file(WRITE ${dir}/probe.cu "extern \"C\" __global__ void probe(float *y) { y[threadIdx.x] = 1.0f; }\n")
    execute_process(
      COMMAND ${METRALE_NVCC} -std=c++17 -cubin -gencode arch=compute_90a,code=sm_90a
              ${dir}/probe.cu -o ${dir}/probe.cubin
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(rc EQUAL 0)
      set(ok TRUE)
    else()
      string(STRIP "${out}" out)
      set(ok FALSE)
      set(METRALE_NVCC_PROBE_ERROR "${METRALE_NVCC} cannot build for sm_90a (CUDA 12+ and a supported host compiler are needed): ${out}"
          CACHE INTERNAL "")
    endif()
    set(METRALE_NVCC_OK ${ok} CACHE INTERNAL "")
    set(METRALE_NVCC_PROBED ${METRALE_NVCC} CACHE INTERNAL "")
  endif()
  if(METRALE_NVCC_OK)
    set(${found_var} TRUE PARENT_SCOPE)
    set(${reason_var} "" PARENT_SCOPE)
  else()
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "${METRALE_NVCC_PROBE_ERROR}" PARENT_SCOPE)
  endif()
endfunction()

# metrale_cuda_kernels(OUT_SOURCES_VAR): custom commands that turn every
# kernels/cuda/<module>.cu into <build>/kernels/cuda_image_<module>.c, plus the index
# cuda_images.c that lists them.  Returns the generated C sources.
function(metrale_cuda_kernels out_var)
  set(src_dir ${PROJECT_SOURCE_DIR}/kernels/cuda)
  set(def ${PROJECT_SOURCE_DIR}/core/include/metrale/kernels.def)
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/kernels)
  file(MAKE_DIRECTORY ${gen_dir})
  file(GLOB cu_files CONFIGURE_DEPENDS ${src_dir}/*.cu)
  file(GLOB cu_headers CONFIGURE_DEPENDS ${src_dir}/*.cuh)

  set(flags -std=c++17 -O3 -I${src_dir} -I${PROJECT_SOURCE_DIR}/core/include
            -Wno-deprecated-gpu-targets)
  if(METRALE_WERROR)
    list(APPEND flags -Werror all-warnings)
  endif()
  if(METRALE_CUDA_LINEINFO)
    list(APPEND flags -lineinfo) # ncu's source view; the SASS is the same
  endif()

  # the manifest's modules, to catch a .cu file that belongs to none
  file(STRINGS ${def} rows REGEX "^METRALE_KERNEL\\(")
  set(manifest_modules)
  foreach(row ${rows})
    if(row MATCHES "^METRALE_KERNEL\\([A-Za-z0-9_]+, *([A-Za-z0-9_]+),")
      list(APPEND manifest_modules ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES manifest_modules)

  foreach(cu ${cu_files})
    get_filename_component(mod ${cu} NAME_WE)
    if(NOT mod IN_LIST manifest_modules)
      message(WARNING "kernels/cuda/${mod}.cu is not a kernels.def module (${manifest_modules}); not built")
    endif()
  endforeach()

  # in manifest order, so describe() lists the kernels as kernels.def does
  set(generated)
  set(modules)
  foreach(mod ${manifest_modules})
    set(cu ${src_dir}/${mod}.cu)
    if(NOT cu IN_LIST cu_files)
      message(WARNING "kernels.def module ${mod} has no kernels/cuda/${mod}.cu: the cuda backend will lack its kernels")
      continue()
    endif()
    list(APPEND modules ${mod})
    set(image_args)
    set(image_files)
    set(target_names)
    foreach(t ${METRALE_CUDA_TARGETS})
      string(REPLACE "|" ";" t "${t}")
      list(GET t 0 name)
      list(GET t 1 kind)
      list(GET t 2 code)
      list(GET t 3 image)
      if(kind STREQUAL "-ptx")
        set(out ${gen_dir}/${mod}.${name}.ptx)
      else()
        set(out ${gen_dir}/${mod}.${name}.cubin)
      endif()
      # through MetraleNvccCheck.cmake, which always asks ptxas for its report (printed where
      # METRALE_CUDA_PTXAS_VERBOSE: registers, shared memory and spills per kernel) and fails the
      # build where ptxas serialised a kernel's wgmmas
      string(REPLACE ";" "|" nvcc_args "${flags};${kind};-gencode;${code};${cu};-o;${out}")
      add_custom_command(
        OUTPUT ${out}
        COMMAND ${CMAKE_COMMAND} -DNVCC=${METRALE_NVCC} -DARGS=${nvcc_args} -DOUT=${out}
                -DVERBOSE=${METRALE_CUDA_PTXAS_VERBOSE} -P ${PROJECT_SOURCE_DIR}/cmake/MetraleNvccCheck.cmake
        DEPENDS ${cu} ${cu_headers} ${def} ${PROJECT_SOURCE_DIR}/cmake/MetraleNvccCheck.cmake
        COMMENT "nvcc kernels/cuda/${mod}.cu for ${name}"
        VERBATIM)
      list(APPEND image_args --image3=${image},file=${out})
      list(APPEND image_files ${out})
      list(APPEND target_names ${name})
    endforeach()
    set(fatbin ${gen_dir}/${mod}.fatbin)
    add_custom_command(
      OUTPUT ${fatbin}
      COMMAND ${METRALE_FATBINARY} --create=${fatbin} -64 ${image_args}
      DEPENDS ${image_files}
      COMMENT "fatbinary ${mod}.fatbin"
      VERBATIM)
    string(REPLACE ";" "," targets_csv "${target_names}")
    string(REPLACE ";" "," files_csv "${image_files}")
    set(c_out ${gen_dir}/cuda_image_${mod}.c)
    add_custom_command(
      OUTPUT ${c_out}
      COMMAND ${CMAKE_COMMAND} -DMODULE=${mod} -DFATBIN=${fatbin} -DTARGETS=${targets_csv}
              -DIMAGES=${files_csv} -DMANIFEST=${def} -DOUTPUT=${c_out}
              -P ${METRALE_CUDA_CMAKE_DIR}/MetraleEmbedCuda.cmake
      DEPENDS ${fatbin} ${image_files} ${def} ${METRALE_CUDA_CMAKE_DIR}/MetraleEmbedCuda.cmake
      COMMENT "embedding ${mod}.fatbin"
      VERBATIM)
    list(APPEND generated ${c_out})
  endforeach()

  # the index of the embedded images, rewritten only when the module list changes
  set(decls "")
  set(entries "")
  foreach(mod ${modules})
    string(APPEND decls "extern const cuda_image cuda_image_${mod};\n")
    string(APPEND entries "    &cuda_image_${mod},\n")
  endforeach()
  list(LENGTH modules count)
  file(CONFIGURE OUTPUT ${gen_dir}/cuda_images.c CONTENT
"/* Generated by cmake/MetraleCuda.cmake from the kernels/cuda modules: do not edit. */
#include \"cuda_images.h\"

${decls}
const cuda_image *const cuda_images[] = {
${entries}    NULL,
};
const unsigned cuda_image_count = ${count}u;
" @ONLY)
  list(APPEND generated ${gen_dir}/cuda_images.c)
  set(${out_var} ${generated} PARENT_SCOPE)
endfunction()
