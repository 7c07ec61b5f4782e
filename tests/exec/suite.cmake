# The exec area's thread-safety test again on its own, labelled for the ThreadSanitizer preset
# (`ctest --preset tsan -L tsan-ok`).
if(TARGET rml_tests_exec)
  add_test(NAME exec_concurrency COMMAND rml_tests_exec --no-version=true --test-case=*concurrent*)
  set_tests_properties(exec_concurrency PROPERTIES LABELS "tsan-ok;exec")
endif()
