# The installed locost tool on its own: installed into a scratch prefix outside the source and
# build trees and run there with both trees hidden (tool_install.sh says how). Skipped (exit 77)
# where the isolation cannot be set up: no unshare, or no permission for a mount namespace.
if(TARGET locost_cli)
  add_test(NAME tool_install
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tool_install.sh ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  # cmake --install writes the build tree's install_manifest.txt: one installation at a time.
  set_tests_properties(tool_install PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 RESOURCE_LOCK locost_install_manifest)
endif()
