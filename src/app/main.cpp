#include "certfleet/app/app.hpp"

int main(int argc, char** argv) { return certfleet::app::run_cli(argc, argv); }
