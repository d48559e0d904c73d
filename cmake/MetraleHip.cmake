# The HIP backend's kernels: finding hipcc, and building kernels/cuda/<module>.cu for AMD
# GPUs into code objects embedded in the module as C arrays.
#
# The CUDA sources are the only kernel sources: each is compiled by hipcc as HIP through
# kernels/hip/cuda_compat.h, once per target (one code object, an ELF .hsaco, each), and
# the code objects of a module are packed into one clang offload bundle: the "fat binary"
# hipModuleLoadData takes, from which the runtime picks the GPU's own code object.
# backends/hip/hip_embed.cmake writes the C source, listing per target the manifest
# kernels each code object really holds (read with llvm-readelf, not from the sources).
# Like the CUDA build, the project stays LANGUAGE C: hipcc runs from add_custom_command.

# Where hipcc is looked for, besides PATH, HIP_PATH and ROCM_PATH.
set(METRALE_HIP_SEARCH_PATHS /opt/rocm/bin /opt/rocm/hip/bin)

# Targets built when METRALE_HIP_TARGETS is empty, CDNA (64-lane wavefronts) first:
# MI200 (gfx90a), MI300 (gfx940, and gfx942 where the toolchain knows it), then RDNA2
# (gfx1030, 32 lanes).  Each is kept when hipcc can build for it: Debian 12's HIP 5.2
# builds gfx90a, gfx940 and gfx1030 (its clang 15 predates gfx942).
set(METRALE_HIP_CANDIDATE_TARGETS gfx90a gfx940 gfx942 gfx1030)
set(METRALE_HIP_TARGETS "" CACHE STRING
    "AMD GPU targets of the HIP kernels (e.g. gfx90a;gfx942); empty: those of ${METRALE_HIP_CANDIDATE_TARGETS} hipcc supports")

# kernels.def modules left out of the HIP build, as "module|reason".  Their kernels are
# absent from the module, describe() says so, and the layer takes the manifest fallback
# of each optional one (a required one absent stops the layer, and the code-object test).  Put a module here (rather than forking or guarding its source) when it
# cannot be built for AMD, e.g. Hopper-only or tensor-core-only code.  (-D on the
# command line replaces the list, e.g. to try a build without one module.)
if(NOT DEFINED METRALE_HIP_EXCLUDED_MODULES)
  set(METRALE_HIP_EXCLUDED_MODULES)
endif()

set(METRALE_HIP_COMPAT_HEADER ${PROJECT_SOURCE_DIR}/kernels/hip/cuda_compat.h)

# The flags every kernel compile shares (besides the target and the output).
function(metrale_hip_flags out_var)
  set(flags -x hip -std=c++17 -O3 --cuda-device-only --no-gpu-bundle-output
            -include ${METRALE_HIP_COMPAT_HEADER}
            -I${PROJECT_SOURCE_DIR}/kernels/cuda -I${PROJECT_SOURCE_DIR}/core/include
            -Wall -Wextra)
  if(METRALE_WERROR)
    list(APPEND flags -Werror)
  endif()
  set(${out_var} ${flags} PARENT_SCOPE)
endfunction()

# Compiles a small kernel through the compat header (its shuffle mapping included) for
# one target; sets ok_var and, on failure, err_var to the compiler's first lines.
function(metrale_hip_probe target ok_var err_var)
  set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/metrale-hipcc-probe)
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/probe.cu
"extern \"C\" __global__ void __launch_bounds__(256) probe(float *y) {
  float v = y[threadIdx.x];
  for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncwarp();
  y[threadIdx.x] = v;
}
")
  metrale_hip_flags(flags)
  execute_process(
    COMMAND ${METRALE_HIPCC} ${flags} --offload-arch=${target} -c ${dir}/probe.cu
            -o ${dir}/probe.${target}.hsaco
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 AND EXISTS ${dir}/probe.${target}.hsaco)
    set(${ok_var} TRUE PARENT_SCOPE)
  else()
    string(REGEX MATCH "[^\n]*error[^\n]*" first "${out}")
    if(NOT first)
      string(STRIP "${out}" first)
    endif()
    set(${ok_var} FALSE PARENT_SCOPE)
    set(${err_var} "${first}" PARENT_SCOPE)
  endif()
endfunction()

# metrale_find_hipcc(FOUND_VAR REASON_VAR): finds hipcc, the offload bundler and
# llvm-readelf of its LLVM, and the targets hipcc can build (METRALE_HIP_BUILD_TARGETS).
function(metrale_find_hipcc found_var reason_var)
  set(hints)
  foreach(e HIP_PATH ROCM_PATH)
    if(DEFINED ENV{${e}})
      list(APPEND hints $ENV{${e}}/bin)
    endif()
  endforeach()
  find_program(METRALE_HIPCC hipcc HINTS ${hints} PATHS ${METRALE_HIP_SEARCH_PATHS}
               DOC "hipcc that builds the HIP backend's code objects")
  if(NOT METRALE_HIPCC)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "hipcc not found (searched PATH, HIP_PATH, ROCM_PATH, ${METRALE_HIP_SEARCH_PATHS}; on Debian: apt-get install hipcc)" PARENT_SCOPE)
    return()
  endif()

  # The bundler and readelf of the LLVM hipcc drives, so the bundle format matches it.
  if(NOT METRALE_HIP_BUNDLER)
    execute_process(COMMAND ${METRALE_HIPCC} -print-prog-name=clang-offload-bundler
                    OUTPUT_VARIABLE b OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(b AND IS_ABSOLUTE "${b}" AND EXISTS "${b}")
      set(METRALE_HIP_BUNDLER "${b}" CACHE FILEPATH "clang-offload-bundler of hipcc's LLVM")
    else()
      find_program(METRALE_HIP_BUNDLER NAMES clang-offload-bundler clang-offload-bundler-15
                   PATHS /opt/rocm/llvm/bin DOC "clang-offload-bundler of hipcc's LLVM")
    endif()
  endif()
  if(NOT METRALE_HIP_BUNDLER)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "clang-offload-bundler not found (hipcc -print-prog-name=clang-offload-bundler gave nothing usable)" PARENT_SCOPE)
    return()
  endif()
  get_filename_component(llvm_bin ${METRALE_HIP_BUNDLER} DIRECTORY)
  find_program(METRALE_HIP_READELF NAMES llvm-readelf HINTS ${llvm_bin} NO_DEFAULT_PATH
               DOC "llvm-readelf that lists the kernels of each code object")
  find_program(METRALE_HIP_READELF NAMES llvm-readelf llvm-readelf-15 PATHS /opt/rocm/llvm/bin)
  if(NOT METRALE_HIP_READELF)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "llvm-readelf not found next to ${METRALE_HIP_BUNDLER}" PARENT_SCOPE)
    return()
  endif()

  # Probe once per hipcc, target request and compat header.
  string(STRIP "${METRALE_HIP_TARGETS}" requested)
  file(MD5 ${METRALE_HIP_COMPAT_HEADER} compat_md5)
  set(key "${METRALE_HIPCC}|${requested}|${compat_md5}")
  if(NOT METRALE_HIP_PROBED STREQUAL key)
    if(requested)
      set(candidates ${requested})
    else()
      set(candidates ${METRALE_HIP_CANDIDATE_TARGETS})
    endif()
    set(ok_targets)
    set(failures "")
    foreach(t ${candidates})
      metrale_hip_probe(${t} ok err)
      if(ok)
        list(APPEND ok_targets ${t})
      else()
        string(APPEND failures " ${t}: ${err};")
      endif()
    endforeach()
    set(error "")
    if(requested AND failures)
      set(error "${METRALE_HIPCC} cannot build every METRALE_HIP_TARGETS target:${failures}")
    elseif(NOT ok_targets)
      set(error "${METRALE_HIPCC} builds none of ${candidates}:${failures}")
    elseif(failures)
      message(STATUS "hip backend: ${METRALE_HIPCC} cannot build${failures} left out")
    endif()
    set(METRALE_HIP_BUILD_TARGETS "${ok_targets}" CACHE INTERNAL "AMD targets the HIP kernels are built for")
    set(METRALE_HIP_PROBE_ERROR "${error}" CACHE INTERNAL "")
    set(METRALE_HIP_PROBED "${key}" CACHE INTERNAL "")
  endif()
  if(METRALE_HIP_PROBE_ERROR)
    set(${found_var} FALSE PARENT_SCOPE)
    set(${reason_var} "${METRALE_HIP_PROBE_ERROR}" PARENT_SCOPE)
  else()
    set(${found_var} TRUE PARENT_SCOPE)
    set(${reason_var} "" PARENT_SCOPE)
  endif()
endfunction()

# metrale_hip_kernels(OUT_SOURCES_VAR): custom commands that turn every
# kernels/cuda/<module>.cu into <build>/kernels/hip_image_<module>.c (its bundle and
# per-target kernel lists), plus the index hip_images.c.  Returns the generated sources.
function(metrale_hip_kernels out_var)
  set(src_dir ${PROJECT_SOURCE_DIR}/kernels/cuda)
  set(def ${PROJECT_SOURCE_DIR}/core/include/metrale/kernels.def)
  set(embed ${PROJECT_SOURCE_DIR}/backends/hip/hip_embed.cmake)
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/kernels)
  file(MAKE_DIRECTORY ${gen_dir})
  file(GLOB cu_files CONFIGURE_DEPENDS ${src_dir}/*.cu)
  file(GLOB cu_headers CONFIGURE_DEPENDS ${src_dir}/*.cuh)
  metrale_hip_flags(flags)

  file(STRINGS ${def} rows REGEX "^METRALE_KERNEL\\(")
  set(manifest_modules)
  foreach(row ${rows})
    if(row MATCHES "^METRALE_KERNEL\\([A-Za-z0-9_]+, *([A-Za-z0-9_]+),")
      list(APPEND manifest_modules ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES manifest_modules)

  set(excluded_names)
  set(excluded_rows "")
  foreach(e ${METRALE_HIP_EXCLUDED_MODULES})
    string(REPLACE "|" ";" e "${e}")
    list(GET e 0 mod)
    list(GET e 1 why)
    list(APPEND excluded_names ${mod})
    string(REPLACE "\"" "'" why "${why}")
    string(APPEND excluded_rows "    {\"${mod}\", \"${why}\"},\n")
  endforeach()

  # The bundle holds an (empty) host entry first, as clang writes it for device-only
  # output, then one entry per target.
  set(bundle_targets host-x86_64-unknown-linux)
  foreach(t ${METRALE_HIP_BUILD_TARGETS})
    list(APPEND bundle_targets hipv4-amdgcn-amd-amdhsa--${t})
  endforeach()
  string(REPLACE ";" "," bundle_targets "${bundle_targets}")
  string(REPLACE ";" "," targets_csv "${METRALE_HIP_BUILD_TARGETS}")

  set(generated)
  set(modules)
  foreach(mod ${manifest_modules})
    set(cu ${src_dir}/${mod}.cu)
    if(mod IN_LIST excluded_names)
      continue()
    endif()
    if(NOT cu IN_LIST cu_files)
      message(WARNING "kernels.def module ${mod} has no kernels/cuda/${mod}.cu: the hip backend will lack its kernels")
      continue()
    endif()
    list(APPEND modules ${mod})
    set(objects)
    set(bundle_inputs -input=/dev/null)
    foreach(t ${METRALE_HIP_BUILD_TARGETS})
      set(out ${gen_dir}/${mod}.${t}.hsaco)
      add_custom_command(
        OUTPUT ${out}
        COMMAND ${METRALE_HIPCC} ${flags} --offload-arch=${t} -c ${cu} -o ${out}
        DEPENDS ${cu} ${cu_headers} ${def} ${METRALE_HIP_COMPAT_HEADER}
        COMMENT "hipcc kernels/cuda/${mod}.cu for ${t}"
        VERBATIM)
      list(APPEND objects ${out})
      list(APPEND bundle_inputs -input=${out})
    endforeach()
    set(bundle ${gen_dir}/${mod}.hipfb)
    add_custom_command(
      OUTPUT ${bundle}
      COMMAND ${METRALE_HIP_BUNDLER} -type=o -bundle-align=4096 -targets=${bundle_targets}
              ${bundle_inputs} -output=${bundle}
      DEPENDS ${objects}
      COMMENT "bundling ${mod}.hipfb"
      VERBATIM)
    string(REPLACE ";" "," objects_csv "${objects}")
    set(c_out ${gen_dir}/hip_image_${mod}.c)
    add_custom_command(
      OUTPUT ${c_out}
      COMMAND ${CMAKE_COMMAND} -DMODULE=${mod} -DBUNDLE=${bundle} -DTARGETS=${targets_csv}
              -DOBJECTS=${objects_csv} -DREADELF=${METRALE_HIP_READELF} -DMANIFEST=${def}
              -DOUTPUT=${c_out} -P ${embed}
      DEPENDS ${bundle} ${objects} ${def} ${embed}
      COMMENT "embedding ${mod}.hipfb"
      VERBATIM)
    list(APPEND generated ${c_out})
  endforeach()

  set(decls "")
  set(entries "")
  foreach(mod ${modules})
    string(APPEND decls "extern const hip_image hip_image_${mod};\n")
    string(APPEND entries "    &hip_image_${mod},\n")
  endforeach()
  set(target_entries "")
  foreach(t ${METRALE_HIP_BUILD_TARGETS})
    string(APPEND target_entries "    \"${t}\",\n")
  endforeach()
  list(LENGTH modules count)
  list(LENGTH METRALE_HIP_BUILD_TARGETS ntargets)
  list(LENGTH excluded_names nexcluded)
  file(CONFIGURE OUTPUT ${gen_dir}/hip_images.c CONTENT
"/* Generated by cmake/MetraleHip.cmake from the kernels/cuda modules: do not edit. */
#include \"hip_images.h\"

${decls}
const hip_image *const hip_images[] = {
${entries}    NULL,
};
const unsigned hip_image_count = ${count}u;

const char *const hip_targets[] = {
${target_entries}    NULL,
};
const unsigned hip_target_count = ${ntargets}u;

const hip_excluded_module hip_excluded_modules[] = {
${excluded_rows}    {NULL, NULL},
};
const unsigned hip_excluded_module_count = ${nexcluded}u;
" @ONLY)
  list(APPEND generated ${gen_dir}/hip_images.c)
  set(${out_var} ${generated} PARENT_SCOPE)
endfunction()
