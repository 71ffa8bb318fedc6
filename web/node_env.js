// node_env.js: (a --pre-js of the model tests built for node) the process's environment for
// getenv: emscripten gives a program a fixed one of its own (OX_TESTDATA, OX_TEST_MODELS and
// OX_CPU_ISA must reach the tests).
Module['preRun'] = (Module['preRun'] || []).concat([function () { Object.assign(ENV, process.env); }]);
