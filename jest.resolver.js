/** jest's own resolution, then the bundle of a package copy that jest.bundles.js bundles (see there). */
const { bundledFile } = require('./jest.bundles');

module.exports = (request, options) =>
  bundledFile(options.defaultResolver(request, options), options.basedir);
