# The exec area's thread-safety tests again on their own, labelled for the ThreadSanitizer preset
# (`ctest --preset tsan -L tsan-ok`): one executor run from many threads, and every op case at 2
# threads (the threads_* cases split each parallel kernel across the pool), and the shared pool's cases.
if(TARGET rml_tests_exec)
  add_test(NAME exec_concurrency COMMAND rml_tests_exec --no-version=true --test-case=*concurrent*)
  add_test(NAME exec_ops_threads COMMAND rml_tests_exec --no-version=true "--test-case=every op matches NumPy*")
  # The shared thread pool: executors sharing workers, limited handles, start failures.
  add_test(NAME exec_thread_pool COMMAND rml_tests_exec --no-version=true "--test-case=thread pool*")
  set_tests_properties(exec_concurrency exec_ops_threads exec_thread_pool PROPERTIES LABELS "tsan-ok;exec")
endif()
