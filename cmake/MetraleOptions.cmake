# AUTO|ON|OFF options: AUTO builds a backend when its toolchain is found, ON fails the
# configure when it is not, OFF never builds it.
function(metrale_tristate var default doc)
  set(${var} ${default} CACHE STRING "${doc}: AUTO, ON or OFF")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${var}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${var} must be AUTO, ON or OFF, not '${${var}}'")
  endif()
  set(${var} ${value} PARENT_SCOPE)
endfunction()

# metrale_backend_decide(NAME FOUND REASON): sets METRALE_BUILD_<NAME> in the caller's
# parent scope (the top level) from the option and whether the toolchain was found.
macro(metrale_backend_decide name found reason)
  string(TOUPPER ${name} _up)
  if(METRALE_${_up} STREQUAL "OFF")
    set(METRALE_BUILD_${_up} OFF)
  elseif(${found})
    set(METRALE_BUILD_${_up} ON)
  elseif(METRALE_${_up} STREQUAL "ON")
    message(FATAL_ERROR "METRALE_${_up}=ON but ${reason}")
  else()
    message(STATUS "${name} backend not built: ${reason}")
    set(METRALE_BUILD_${_up} OFF)
  endif()
  set(METRALE_BUILD_${_up} ${METRALE_BUILD_${_up}} PARENT_SCOPE)
endmacro()
