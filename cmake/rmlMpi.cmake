# rml::mpi: rml::rml plus MPI, for the optional header rml/dist/mpi.hpp (a graph run as a pipeline
# across MPI processes). Created only when find_package(MPI) finds MPI; otherwise nothing here
# exists and rml builds as before. The header uses MPI's C API only, so either binding will do.
find_package(MPI QUIET)
if(TARGET MPI::MPI_CXX)
  set(RML_MPI_TARGET MPI::MPI_CXX)
elseif(TARGET MPI::MPI_C)
  set(RML_MPI_TARGET MPI::MPI_C)
else()
  message(STATUS "rml: MPI not found; rml::mpi, the distributed example and its tests are skipped")
  return()
endif()
message(STATUS "rml: MPI found (${MPIEXEC_EXECUTABLE}); rml::mpi available")

add_library(rml_mpi INTERFACE)
add_library(rml::mpi ALIAS rml_mpi)
set_target_properties(rml_mpi PROPERTIES EXPORT_NAME mpi)
target_link_libraries(rml_mpi INTERFACE rml ${RML_MPI_TARGET})
target_compile_definitions(rml_mpi INTERFACE RML_HAVE_MPI=1)  # for code that uses rml/dist/mpi.hpp when it can

# A separate export set: rmlConfig.cmake loads it only where find_package(MPI) succeeds. Component `rml`
# like the rest (rmlInstall.cmake), so a parent project can install(EXPORT) its own targets linking it.
install(TARGETS rml_mpi EXPORT rmlMpiTargets ${_rml_component})
install(EXPORT rmlMpiTargets NAMESPACE rml:: DESTINATION "${RML_INSTALL_CMAKEDIR}" ${_rml_component})
