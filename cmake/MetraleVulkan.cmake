# Build rules for the Vulkan backend's kernels.
#
# metrale_vulkan_kernels(OUT_VAR): compiles every kernels/vulkan/<kernel>.comp to SPIR-V
# (glslangValidator --target-env vulkan1.2, with -DMETRALE_KERNEL_<kernel>) and embeds
# the modules in a generated C source whose path is returned in OUT_VAR.  Also makes
# the push-constant layout from kernels.def (tools/gen/vk_push_constants.c):
#   <bin>/gen/metrale_vk_args.glsl   the shaders' `Args` blocks and LOCAL_SIZE
#   <bin>/gen/vk_push_table.h        the same offsets for the host
# A kernels/vulkan/*.comp whose name is not a kernels.def row fails the build (its
# shader finds no argument block).
set(METRALE_VK_DELTA_DK_MAX 256 CACHE STRING
    "Largest key head dim of the Vulkan delta-rule kernels (per-invocation state column)")

function(metrale_vulkan_kernels out_var)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/gen)
  set(src_dir ${PROJECT_SOURCE_DIR}/kernels/vulkan)
  file(MAKE_DIRECTORY ${gen})

  # Host programs that run during the build.
  add_executable(metrale_vk_push_constants ${PROJECT_SOURCE_DIR}/tools/gen/vk_push_constants.c)
  target_include_directories(metrale_vk_push_constants PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  add_executable(metrale_vk_embed_spirv ${PROJECT_SOURCE_DIR}/tools/gen/vk_embed_spirv.c)
  set_target_properties(metrale_vk_push_constants metrale_vk_embed_spirv PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${gen}/bin)

  add_custom_command(
    OUTPUT ${gen}/metrale_vk_args.glsl ${gen}/vk_push_table.h
    COMMAND metrale_vk_push_constants ${gen}/metrale_vk_args.glsl ${gen}/vk_push_table.h
    DEPENDS metrale_vk_push_constants ${PROJECT_SOURCE_DIR}/core/include/metrale/kernels.def
    COMMENT "Vulkan push-constant layouts from kernels.def"
    VERBATIM)

  file(GLOB shaders CONFIGURE_DEPENDS ${src_dir}/*.comp)
  file(GLOB includes CONFIGURE_DEPENDS ${src_dir}/*.glsl)
  set(spvs)
  set(pairs)
  foreach(shader ${shaders})
    get_filename_component(name ${shader} NAME_WE)
    set(spv ${gen}/${name}.spv)
    set(validate)
    if(METRALE_SPIRV_VAL)
      set(validate COMMAND ${METRALE_SPIRV_VAL} --target-env vulkan1.2 ${spv})
    endif()
    add_custom_command(
      OUTPUT ${spv}
      COMMAND ${METRALE_GLSLANG} --quiet --target-env vulkan1.2 -DMETRALE_KERNEL_${name}
              -DVK_DELTA_DK_MAX=${METRALE_VK_DELTA_DK_MAX} -I${src_dir} -I${gen}
              -o ${spv} ${shader}
      ${validate}
      DEPENDS ${shader} ${includes} ${gen}/metrale_vk_args.glsl
      COMMENT "SPIR-V ${name}"
      VERBATIM)
    list(APPEND spvs ${spv})
    list(APPEND pairs ${name}=${spv})
  endforeach()

  add_custom_command(
    OUTPUT ${gen}/vk_shaders.c
    COMMAND metrale_vk_embed_spirv ${gen}/vk_shaders.c ${pairs}
    DEPENDS metrale_vk_embed_spirv ${spvs}
    COMMENT "Embedding the Vulkan kernels"
    VERBATIM)
  set(${out_var} ${gen}/vk_shaders.c ${gen}/vk_push_table.h PARENT_SCOPE)
endfunction()

# metrale_vulkan_tests(): the backend's own Criterion programs (backends/vulkan/tests),
# labelled `vulkan` and `unit`.  Called deferred from backends/vulkan/CMakeLists.txt,
# because the test helpers of tests/CMakeLists.txt are defined after the backends.
function(metrale_vulkan_tests)
  set(dir ${PROJECT_SOURCE_DIR}/backends/vulkan/tests)
  foreach(t device memory)
    metrale_add_criterion(vulkan_${t} SOURCES ${dir}/test_vk_${t}.c ${dir}/vk_test_util.c
                          LABELS unit vulkan)
    target_include_directories(vulkan_${t} PRIVATE ${dir})
  endforeach()
  # kernel shapes beyond the shared suite's, checked with its harness against cpu
  set(cf ${PROJECT_SOURCE_DIR}/tests/conformance)
  if(EXISTS ${cf}/harness.c)
    metrale_add_criterion(vulkan_shapes
      SOURCES ${dir}/test_vk_shapes.c ${cf}/harness.c
              ${PROJECT_SOURCE_DIR}/tests/common/conformance_util.c
      LABELS conformance vulkan ENV METRALE_TEST_BACKEND=vulkan)
    target_include_directories(vulkan_shapes PRIVATE ${cf})
  endif()
  # METRALE_TEST_REQUIRE_BACKEND=1 (tests/common/test_skip.h): a suite told that its backend is
  # there fails where the driver is missing, rather than skipping every test (as these do
  # without it).  Checked here with no ICD, for both shared suites.
  foreach(pair "metrale_conformance:norm/rmsnorm_f32" "metrale_layer_tests:slots/graph_replay_equals_eager_launches")
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 suite)
    list(GET pair 1 one_test)
    if(TARGET ${suite})
      add_test(NAME ${suite}_requires_vulkan COMMAND ${suite} --filter ${one_test} --short-filename)
      set_tests_properties(${suite}_requires_vulkan PROPERTIES LABELS "unit;vulkan"
        ENVIRONMENT "METRALE_TEST_BACKEND=vulkan;VK_DRIVER_FILES=/nonexistent/icd.json;METRALE_TEST_REQUIRE_BACKEND=1"
        PASS_REGULAR_EXPRESSION "METRALE_TEST_REQUIRE_BACKEND is set: backend vulkan unavailable")
    endif()
  endforeach()
endfunction()
