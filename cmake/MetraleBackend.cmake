# metrale_add_backend(NAME SOURCES src... [LIBS lib...] [INCLUDES dir...])
#
# Builds libmetrale-backend-NAME.so, a module the registry loads with dlopen.  It links
# against libmetrale (status helpers, manifest) and nothing vendor-specific: the vendor
# runtime is opened with dlopen inside the module.
function(metrale_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;INCLUDES" ${ARGN})
  set(target metrale-backend-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "metrale-backend-${name}"
    C_VISIBILITY_PRESET hidden
    INSTALL_RPATH "$ORIGIN/..")
  target_include_directories(${target} PRIVATE ${ARG_INCLUDES})
  target_link_libraries(${target} PRIVATE metrale ${ARG_LIBS} ${CMAKE_DL_LIBS})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/metrale)
endfunction()
