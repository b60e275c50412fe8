# Packaging tests: a tiny consumer project built through find_package (after installing this
# tree into a scratch prefix) and through add_subdirectory, then run.
set(_cons ${CMAKE_CURRENT_BINARY_DIR}/consumer)
add_test(NAME consumer_install
  COMMAND ${CMAKE_COMMAND} --install ${PROJECT_BINARY_DIR} --prefix ${_cons}/prefix)
set_tests_properties(consumer_install PROPERTIES FIXTURES_SETUP locost_installed RESOURCE_LOCK locost_install_manifest)
add_test(NAME consumer_find_package
  COMMAND ${CMAKE_COMMAND} -DMODE=package -DSRC=${CMAKE_CURRENT_SOURCE_DIR}/consumer
          -DBIN=${_cons}/package -DPREFIX=${_cons}/prefix -DLOCOST_SOURCE_DIR=${PROJECT_SOURCE_DIR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/build_and_run.cmake)
set_tests_properties(consumer_find_package PROPERTIES FIXTURES_REQUIRED locost_installed)
add_test(NAME consumer_add_subdirectory
  COMMAND ${CMAKE_COMMAND} -DMODE=subdir -DSRC=${CMAKE_CURRENT_SOURCE_DIR}/consumer
          -DBIN=${_cons}/subdir -DLOCOST_SOURCE_DIR=${PROJECT_SOURCE_DIR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/build_and_run.cmake)
