# Differential tests against the large peers (conformance/peers/, peerlib.py): PyTorch, XLA (jax) and
# MMA-Sim, installed from requirements-peers.txt into a Python of their own, never CI's quick tier's.
#   -DLOWBIT_PEERS_PYTHON=/path/to/venv/bin/python      registers them under the labels full and peers
#   -DLOWBIT_PEERS_TORCH212_PYTHON=/path/to/python      also compares the torch-2.12 profile (torch 2.12.1)
# Under those labels a missing peer is a failure (LOWBIT_REQUIRE_PEERS=1), never a silent skip.  The quick
# tier replays the fixtures those libraries produced (peer_fixtures, with the suite's own Python).
set(LOWBIT_PEERS_PYTHON "" CACHE FILEPATH "Python with requirements-peers.txt installed (torch, jax, MMA-Sim)")
set(LOWBIT_PEERS_TORCH212_PYTHON "" CACHE FILEPATH "Python with torch 2.12.1 (the torch-2.12 profile)")

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME peer_fixtures
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/peers/test_fixtures.py)
  set_tests_properties(peer_fixtures PROPERTIES LABELS quick ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>" TIMEOUT 600)
endif()

function(lowbit_peer_test name python file)
  add_test(NAME ${name}
           COMMAND ${python} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/peers/${file})
  set_tests_properties(${name} PROPERTIES
    LABELS "full;peers"
    ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1;${ARGN}"
    TIMEOUT 3600)
endfunction()

if(LOWBIT_PEERS_PYTHON)
  lowbit_peer_test(peer_torch ${LOWBIT_PEERS_PYTHON} test_torch.py)
  lowbit_peer_test(peer_torch_default ${LOWBIT_PEERS_PYTHON} test_torch.py ATEN_CPU_CAPABILITY=default)
  lowbit_peer_test(peer_xla ${LOWBIT_PEERS_PYTHON} test_xla.py)
  lowbit_peer_test(peer_mmasim ${LOWBIT_PEERS_PYTHON} test_mmasim.py)
  lowbit_peer_test(peer_torchao ${LOWBIT_PEERS_PYTHON} test_torchao.py)
  # compressed-tensors' own compressors on a small Llama built locally (conformance/checkpoint/).
  add_test(NAME peer_compressed_tensors
           COMMAND ${LOWBIT_PEERS_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/checkpoint/test_ct_peer.py)
  set_tests_properties(peer_compressed_tensors PROPERTIES
    LABELS "full;peers" ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1" TIMEOUT 1200)
  # compressed-tensors' own loader (transformers' CompressedTensorsHfQuantizer, dequantize) on lowbit's exports.
  add_test(NAME peer_compressed_tensors_load
           COMMAND ${LOWBIT_PEERS_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/checkpoint/test_export_peer.py)
  set_tests_properties(peer_compressed_tensors_load PROPERTIES
    LABELS "full;peers" ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1" TIMEOUT 1200)
  # ModelOpt's own quantize and export_hf_checkpoint on the same Llama, on the CPU.
  add_test(NAME peer_modelopt
           COMMAND ${LOWBIT_PEERS_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/checkpoint/test_modelopt_peer.py)
  set_tests_properties(peer_modelopt PROPERTIES
    LABELS "full;peers" ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1" TIMEOUT 1200)
  # gguf-py's GGUFWriter and MXFP4 quantizer (conformance/checkpoint/make_gguf.py).
  add_test(NAME peer_gguf
           COMMAND ${LOWBIT_PEERS_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/checkpoint/test_gguf_peer.py)
  set_tests_properties(peer_gguf PROPERTIES
    LABELS "full;peers" TIMEOUT 1200
    ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1;LOWBIT_CHECKPOINT_WRITE_TEST=$<TARGET_FILE:test_checkpoint_write>")
  # transformers' FineGrainedFP8 quantizer and its loader on the same Llama (weight_scale_inv), on the CPU.
  add_test(NAME peer_transformers_fp8
           COMMAND ${LOWBIT_PEERS_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/checkpoint/test_fp8_block_peer.py)
  set_tests_properties(peer_transformers_fp8 PROPERTIES
    LABELS "full;peers" ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1" TIMEOUT 600)
  # torch's GradScaler on the CPU against `lowbit state step` (conformance/state/).
  add_test(NAME peer_gradscaler
           COMMAND ${LOWBIT_PEERS_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/state/test_state_peer.py)
  set_tests_properties(peer_gradscaler PROPERTIES
    LABELS "full;peers" ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_REQUIRE_PEERS=1" TIMEOUT 600)
else()
  message(STATUS "lowbit: LOWBIT_PEERS_PYTHON not set; the peers label (torch, jax, MMA-Sim) is not registered")
endif()
if(LOWBIT_PEERS_TORCH212_PYTHON)
  lowbit_peer_test(peer_torch_2_12 ${LOWBIT_PEERS_TORCH212_PYTHON} test_torch.py)
endif()
