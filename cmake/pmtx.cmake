# pmtx.cmake - how engines and programs are declared.
#
# pmtx_engine(SOURCES src... [PERSISTENT] [OWN_POOL] [LIBS lib...]
#             [EXPORTS map] [HEADERS h...] [CRASHSIM_ARGS arg...]
#             [CRASHSIM_SHARED_ARGS arg...])
#   Called by an engine folder's CMakeLists.txt; the folder's name is the
#   engine's name, NAME below. Builds libtxn-NAME (the
#   runtime, pmtx's pool format unless OWN_POOL, the retention layer and
#   SOURCES), its pkg-config file and its CMake target pmtx::NAME, and
#   records the engine for the programs, tests and crash simulator:
#   PERSISTENT (it keeps a log; crash and kill tests run on it), OWN_POOL
#   (it implements engine.h's eng_pool_* layer itself), LIBS (what it links
#   privately), EXPORTS (its linker version script; default txn.h's calls
#   only), HEADERS (public headers it installs beside txn.h),
#   CRASHSIM_ARGS (what its crash-simulator campaigns add),
#   CRASHSIM_SHARED_ARGS (what its campaigns of threads on shared objects
#   add instead). A barriers.h in the folder is its barrier formula
#   (tests/barrier_counts.c).
function(pmtx_engine)
  cmake_parse_arguments(A "PERSISTENT;OWN_POOL" "EXPORTS"
                        "SOURCES;LIBS;HEADERS;CRASHSIM_ARGS;CRASHSIM_SHARED_ARGS" ${ARGN})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  get_filename_component(name ${dir} NAME)
  list(TRANSFORM A_SOURCES PREPEND ${dir}/)
  if(NOT A_EXPORTS)
    set(A_EXPORTS ${PROJECT_SOURCE_DIR}/txn/exports.map)
  else()
    set(A_EXPORTS ${dir}/${A_EXPORTS})
  endif()
  set_property(GLOBAL APPEND PROPERTY PMTX_ENGINES ${name})
  if(A_PERSISTENT)
    set_property(GLOBAL APPEND PROPERTY PMTX_PERSISTENT_ENGINES ${name})
  endif()
  foreach(key DIR SOURCES OWN_POOL LIBS CRASHSIM_ARGS CRASHSIM_SHARED_ARGS)
    if(key STREQUAL "DIR")
      set(value ${dir})
    else()
      set(value ${A_${key}})
    endif()
    set_property(GLOBAL PROPERTY PMTX_ENGINE_${key}_${name} "${value}")
  endforeach()

  set(objects $<TARGET_OBJECTS:pmtx-runtime> $<TARGET_OBJECTS:pmtx-layout>)
  if(NOT A_OWN_POOL)
    list(APPEND objects $<TARGET_OBJECTS:pmtx-format>)
  endif()
  add_library(txn-${name} SHARED ${objects} ${A_SOURCES})
  target_compile_definitions(txn-${name} PRIVATE PMTX_ENGINE_NAME="${name}")
  target_include_directories(txn-${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/txn/include>
           $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/layout/include>
           $<BUILD_INTERFACE:${dir}>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/txn)
  target_link_libraries(txn-${name}
    PUBLIC Threads::Threads
    PRIVATE PkgConfig::PMEM PkgConfig::ATOMIC_OPS ${A_LIBS} ${CMAKE_DL_LIBS})
  # only txn_* is exported: engines' internals never leak into programs.
  # SOVERSION: txn.h's inline paths read struct txn__hot, so its layout is
  # ABI (1: since the inline paths; 2: txn_pool_opts and txn_pool_info gained
  # max_size, pools that grow)
  set_target_properties(txn-${name} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION 2 EXPORT_NAME ${name}
    LINK_DEPENDS ${A_EXPORTS})
  target_link_options(txn-${name} PRIVATE -Wl,--version-script=${A_EXPORTS})
  install(TARGETS txn-${name} EXPORT pmtxTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  if(A_HEADERS)
    list(TRANSFORM A_HEADERS PREPEND ${dir}/)
    install(FILES ${A_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
  # relocatable: the prefix is found from where the .pc file lies
  file(RELATIVE_PATH PC_UP ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
  string(REGEX REPLACE "/$" "" PC_UP "${PC_UP}")
  set(PC_ENGINE ${name})
  set(PC_CFLAGS "")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/txn.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/txn-${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/txn-${name}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  if(A_PERSISTENT)
    pmtx_check_library(${name} "${A_SOURCES}" "${A_LIBS}" ${A_EXPORTS} "${A_OWN_POOL}")
  endif()
endfunction()

# pmtx_check_library(NAME SOURCES LIBS EXPORTS OWN_POOL): libtxn-NAME-check, the
# engine as txn-crashcheck checks it (docs/crashcheck.md): the runtime,
# pmtx's pool format, the retention layer and the engine compiled again
# with the persist layer's hooks on (PMTX_TRACE) and the recorder
# (check/record.c) behind them; txn_begin (and txn__begin, which txn.h's
# inline txn_begin calls), txn_commit, txn_abort, txn_sync, txn_alloc and
# txn_pool_close renamed so that the recorder's wrappers are the exported
# calls;
# mmap, munmap, renameat2, link and getrandom wrapped by the linker, so
# that the recorder finds the pool. pmtx::NAME-check, txn-NAME-check.pc.
# OWN_POOL (pmdk): the engine's pool is written by a library of its own
# with plain stores and mapped by its own mmap calls: the recorder infers
# the stores at each flush and fence (CHK_INFER, check/record.c) and exports
# mmap, munmap, open and fstat (the pool found; libpmemobj's uuid drawn from
# the seed, its crtime fixed) instead of wrapping them; no leak check
# (pmtx's allocator is not there). docs/crashcheck.md.
function(pmtx_check_library name sources libs exports own_pool)
  set(lib txn-${name}-check)
  set_property(GLOBAL APPEND PROPERTY PMTX_CHECK_ENGINES ${name})
  set(format ${PMTX_FORMAT_SOURCES})
  set(exported "pthread_create; pthread_exit; pthread_join; pthread_mutex_lock; pthread_mutex_trylock; pthread_mutex_unlock;")
  set(wraps -Wl,--wrap=mmap,--wrap=munmap,--wrap=renameat2,--wrap=link,--wrap=getrandom)
  if(own_pool)
    set(format)
    string(APPEND exported " mmap; munmap; open; fstat;")
    set(wraps -Wl,--wrap=renameat2,--wrap=link,--wrap=getrandom)
  endif()
  # record.c last: its constructor runs after the library's others
  add_library(${lib} SHARED ${PMTX_RUNTIME_SOURCES} ${format}
              ${PMTX_LAYOUT_SOURCES} ${sources} ${PROJECT_SOURCE_DIR}/check/sched.c
              ${PROJECT_SOURCE_DIR}/check/record.c)
  if(own_pool)
    target_compile_definitions(${lib} PRIVATE CHK_INFER)
  endif()
  target_compile_definitions(${lib} PRIVATE PMTX_ENGINE_NAME="${name}"
    txn_begin=chk_real_txn_begin txn__begin=chk_real_txn__begin
    txn_commit=chk_real_txn_commit txn_abort=chk_real_txn_abort txn_sync=chk_real_txn_sync
    txn_alloc=chk_real_txn_alloc txn_pool_close=chk_real_txn_pool_close
    PUBLIC PMTX_TRACE)
  # the engine whose crash-simulator campaigns take no switch point inside a
  # transaction takes none under --threads-sched either (check/chk_sched.h)
  get_property(shared_args GLOBAL PROPERTY PMTX_ENGINE_CRASHSIM_SHARED_ARGS_${name})
  if("--no-switch-in-tx" IN_LIST shared_args)
    target_compile_definitions(${lib} PRIVATE CHK_NO_SWITCH_IN_TX)
  endif()
  # the engine's exports and the scheduler's pthread calls (check/sched.c)
  file(READ ${exports} map)
  string(REPLACE "global:" "global: ${exported}" map "${map}")
  set(check_map ${PROJECT_BINARY_DIR}/check/${lib}.map)
  file(WRITE ${check_map} "${map}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${exports})
  target_include_directories(${lib}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/txn/include>
           $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/layout/include>
           $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}>
           $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/check>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/txn ${PROJECT_SOURCE_DIR}/layout
            ${PROJECT_SOURCE_DIR}/check ${PROJECT_SOURCE_DIR}/tests/crashsim
            # the runtime's and the format's sources see what they see in
            # their own object libraries
            $<TARGET_PROPERTY:pmtx-runtime,INCLUDE_DIRECTORIES>
            $<TARGET_PROPERTY:pmtx-format,INCLUDE_DIRECTORIES>)
  # no tail calls: the scheduler tells the library's own mutex calls from
  # the program's by their return address, which a jump to
  # pthread_mutex_unlock at a function's end leaves in the program
  target_compile_options(${lib} PRIVATE -fno-optimize-sibling-calls)
  target_link_libraries(${lib}
    PUBLIC Threads::Threads
    PRIVATE PkgConfig::PMEM PkgConfig::ATOMIC_OPS ${libs} ${CMAKE_DL_LIBS})
  set_target_properties(${lib} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION 2 EXPORT_NAME ${name}-check LINK_DEPENDS ${check_map})
  target_link_options(${lib} PRIVATE -Wl,--version-script=${check_map} ${wraps})
  install(TARGETS ${lib} EXPORT pmtxTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/check/txn_check.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set(PC_ENGINE ${name}-check)
  set(PC_CFLAGS " -DPMTX_TRACE")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/txn.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/${lib}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${lib}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

# pmtx_engine_vars(): the engines' records as variables of the calling
# scope: PMTX_ENGINES, PMTX_PERSISTENT_ENGINES, PMTX_CHECK_ENGINES (those
# with a -check library) and, per engine E,
# ENGINE_DIR_E, ENGINE_SOURCES_E, ENGINE_OWN_POOL_E, ENGINE_LIBS_E,
# ENGINE_CRASHSIM_ARGS_E, ENGINE_CRASHSIM_SHARED_ARGS_E; PMTX_APP_ENGINES:
# the engines the applications' suites run on in this build, every one but
# in the AddressSanitizer build, where the applications' code is the same
# on every engine and undo's keeps CI under its time (the engines' own
# suites and crash campaigns run there on every engine); PMTX_IO_ENGINES:
# those the server's connection suites run on (descriptor limits,
# libmemcached's conformance), code no engine changes: undo's, and incll's,
# whose replies wait for an epoch.
macro(pmtx_engine_vars)
  get_property(PMTX_ENGINES GLOBAL PROPERTY PMTX_ENGINES)
  set(PMTX_APP_ENGINES ${PMTX_ENGINES})
  set(PMTX_IO_ENGINES)
  foreach(_e undo incll)
    if(_e IN_LIST PMTX_ENGINES)
      list(APPEND PMTX_IO_ENGINES ${_e})
    endif()
  endforeach()
  if(PMTX_SANITIZE MATCHES "address")
    set(PMTX_APP_ENGINES)
    foreach(_e undo)
      if(_e IN_LIST PMTX_ENGINES)
        list(APPEND PMTX_APP_ENGINES ${_e})
      endif()
    endforeach()
  endif()
  get_property(PMTX_PERSISTENT_ENGINES GLOBAL PROPERTY PMTX_PERSISTENT_ENGINES)
  get_property(PMTX_CHECK_ENGINES GLOBAL PROPERTY PMTX_CHECK_ENGINES)
  foreach(_e IN LISTS PMTX_ENGINES)
    foreach(_k DIR SOURCES OWN_POOL LIBS CRASHSIM_ARGS CRASHSIM_SHARED_ARGS)
      get_property(ENGINE_${_k}_${_e} GLOBAL PROPERTY PMTX_ENGINE_${_k}_${_e})
    endforeach()
  endforeach()
endmacro()

# pmtx_program(NAME SOURCES src... [ENGINES e...] [LIBS l...]):
# build/bin/NAME-<engine> for each engine, from one source, which sees the
# engine it is linked with as PMTX_LINKED_ENGINE (a string) and whether it
# is persistent as PMTX_LINKED_PERSISTENT (1 or 0).
function(pmtx_program name)
  cmake_parse_arguments(A "" "" "SOURCES;ENGINES;LIBS" ${ARGN})
  if(NOT A_ENGINES)
    set(A_ENGINES ${PMTX_ENGINES})
  endif()
  foreach(engine IN LISTS A_ENGINES)
    if(engine IN_LIST PMTX_ENGINES)
      add_executable(${name}-${engine} ${A_SOURCES})
      target_link_libraries(${name}-${engine} PRIVATE txn-${engine} ${A_LIBS})
      if(engine IN_LIST PMTX_PERSISTENT_ENGINES)
        set(persistent 1)
      else()
        set(persistent 0)
      endif()
      target_compile_definitions(${name}-${engine} PRIVATE PMTX_LINKED_ENGINE="${engine}"
                                 PMTX_LINKED_PERSISTENT=${persistent})
    endif()
  endforeach()
endfunction()

# pmtx_engine_exe(NAME ENGINE SOURCES src...): a program with the runtime
# and one engine compiled in (not linked to libtxn-<engine>), so that it
# may use internal headers and build options: crash simulator, fuzzers.
function(pmtx_engine_exe name engine)
  cmake_parse_arguments(A "" "" "SOURCES" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  set(core ${PMTX_RUNTIME_SOURCES} ${PMTX_LAYOUT_SOURCES})
  if(NOT ENGINE_OWN_POOL_${engine})
    list(APPEND core ${PMTX_FORMAT_SOURCES})
  endif()
  target_sources(${name} PRIVATE ${core} ${ENGINE_SOURCES_${engine}})
  target_compile_definitions(${name} PRIVATE PMTX_ENGINE_NAME="${engine}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/txn/include
    ${PROJECT_SOURCE_DIR}/layout/include ${PROJECT_SOURCE_DIR}/layout
    ${PROJECT_SOURCE_DIR}/txn ${ENGINE_DIR_${engine}})
  if(NOT ENGINE_OWN_POOL_${engine}) # the format's own sources are compiled in
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/txn/format)
  endif()
  target_link_libraries(${name} PRIVATE PkgConfig::PMEM PkgConfig::ATOMIC_OPS
    ${ENGINE_LIBS_${engine}} Threads::Threads ${CMAKE_DL_LIBS})
endfunction()

# pmtx_add_test(NAME COMMAND cmd... [ENV VAR=value...] [TIMEOUT s]
#               [PROPERTIES prop value...])
#   Every test of the project is declared here, so that all run in the same
#   environment: pools treated as persistent memory (PMEM_IS_PMEM_FORCE=1),
#   check's per-test timeout, then the test's own ENV (a later setting of a
#   variable wins); TIMEOUT 600 s unless given; other test PROPERTIES as
#   set_tests_properties takes them. The command's arguments are passed as
#   written, an empty one or one holding a semicolon (a script for sh -c)
#   included.
function(pmtx_add_test name)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "TIMEOUT" "COMMAND;ENV;PROPERTIES")
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  # each argument as a bracket argument, so that none is split or dropped
  set(code "add_test(NAME [==[${name}]==] COMMAND")
  list(LENGTH A_COMMAND n)
  set(i 0)
  while(i LESS n)
    list(GET A_COMMAND ${i} arg)
    string(APPEND code " [==[${arg}]==]")
    math(EXPR i "${i} + 1")
  endwhile()
  cmake_language(EVAL CODE "${code})")
  string(REPLACE "\\;" ";" env "${A_ENV}")
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "PMEM_IS_PMEM_FORCE=1;CK_DEFAULT_TIMEOUT=120;${env}" TIMEOUT ${A_TIMEOUT})
  list(LENGTH A_PROPERTIES n)
  set(i 0)
  while(i LESS n)
    list(GET A_PROPERTIES ${i} key)
    math(EXPR i "${i} + 1")
    list(GET A_PROPERTIES ${i} value)
    math(EXPR i "${i} + 1")
    set_tests_properties(${name} PROPERTIES ${key} "${value}")
  endwhile()
endfunction()
